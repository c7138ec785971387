// Several devices of one model in one process (issue 38), each figure from fresh processes:
//
//   BM_SecondDeviceFirstKernel   the seed's AppKernel on the second device (device_dlview made
//                                before the first device's link, no disk cache): device_dlsym on
//                                the view and one launch. Beside it in every iteration, in turns,
//                                a disk-cache hit: a fresh process's first kernel (opens,
//                                device_dlsym, one launch) from a warm cache. "vs hit" is the ratio
//                                of their means: the second device should load the first's binary
//                                (goal: at most 1.1 times a hit), never link again.
//   BM_DevicesSetUp/N            N devices' first kernels, one after the other (a view on each,
//                                device_dlsym, one launch), no disk cache: "per device" should
//                                stay flat as N grows. CUDA's primary contexts are made before.
//
// OpenCL: PoCL with N CPU devices (POCL_DEVICES); where devdl places a program's variables in
// host memory (PoCL), a binary holds their address and a second device links its own. --cuda: the
// machine's GPUs (BM_DevicesSetUp up to their number). Links libdevdl.so (and devdl's OpenCL
// entry points) so that it runs on the GPU machine. Needs the test images: run from the build
// directory, or pass DEVDL_TEST_IMAGES=<dir>.
#include "backend/opencl/opencl_api.h"
#include "child_process.h"
#include "opencl_launch.h"
#include "devdl.h"
#include "e2e/cuda_driver.h"

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace {

namespace cuda = devdl::test::cuda;
using devdl::bench::runChild;
using Clock = std::chrono::steady_clock;

bool onCuda = false;  // --cuda

std::string image(const std::string &name) {
  const char *dir = std::getenv("DEVDL_TEST_IMAGES");
  return std::string(dir ? dir : "tests/images") + "/" + name;
}

// ---- the child ----------------------------------------------------------------------------------

// The devices of the default device's backend: its OpenCL platform's, or every GPU.
std::vector<devdl_native> devicesOf(const devdl_native &first) {
  std::vector<devdl_native> all;
  if (first.backend == DEVDL_BACKEND_CUDA) {
    int count = 0;
    cuda::driver()->cuDeviceGetCount(&count);
    for (int i = 0; i < count; ++i)
      all.push_back({sizeof(devdl_native), DEVDL_BACKEND_CUDA, nullptr, reinterpret_cast<void *>(intptr_t{i}), nullptr});
    return all;
  }
  const auto &cl = *devdl::backend::opencl::api();
  cl_uint count = 0;
  auto platform = static_cast<cl_platform_id>(first.platform);
  cl.clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &count);
  std::vector<cl_device_id> ids(count);
  cl.clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, count, ids.data(), nullptr);
  for (cl_device_id id : ids) all.push_back({sizeof(devdl_native), DEVDL_BACKEND_OPENCL, platform, id, nullptr});
  return all;
}

// One launch of `kernel(int *out)` on one work-item of `device`, finished.
bool launch(const devdl_native &device, void *kernel) {
  if (device.backend == DEVDL_BACKEND_CUDA) {
    const cuda::Driver &cu = *cuda::driver();
    cuda::CUcontext context = nullptr;
    const auto ordinal = static_cast<int>(reinterpret_cast<intptr_t>(device.device));
    if (cu.cuDevicePrimaryCtxRetain(&context, ordinal) != cuda::CUDA_SUCCESS) return false;
    return !cuda::runIntKernel(cu, context, kernel, 1).empty();  // the primary context stays: the view's
  }
  return devdl::bench::launchOnOneWorkItem(*devdl::backend::opencl::api(), static_cast<cl_device_id>(device.device),
                                           static_cast<cl_kernel>(kernel));
}

int failed(const char *what) {
  const char *error = device_dlerror();
  std::fprintf(stderr, "%s: %s\n", what, error ? error : "failed");
  return 1;
}

// --child hit|second|devices LIB APP [N]: prints the nanoseconds timed.
int child(int argc, char **argv) {
  if (argc < 4) return std::fprintf(stderr, "usage: --child hit|second|devices LIB APP [N]\n"), 2;
  const std::string mode = argv[1];
  devdl_native first{};
  first.size = sizeof first;
  if (device_dlnative(&first) != 0) return failed("device_dlnative");  // the device opened, untimed
  const std::vector<devdl_native> devices = devicesOf(first);
  auto nanoseconds = [](Clock::time_point since) {
    return static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - since).count());
  };
  if (mode == "hit") {
    const auto start = Clock::now();
    void *lib = device_dlopen(argv[2], DEVDL_LAZY | DEVDL_GLOBAL);
    void *app = lib ? device_dlopen(argv[3], DEVDL_LAZY) : nullptr;
    void *kernel = app ? device_dlsym(app, "AppKernel") : nullptr;
    if (!kernel || !launch(first, kernel)) return failed("the first kernel");
    std::printf("%lld\n", nanoseconds(start));
    return 0;
  }
  void *lib = device_dlopen(argv[2], DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = lib ? device_dlopen(argv[3], DEVDL_LAZY) : nullptr;
  if (!app) return failed("device_dlopen");
  if (mode == "second") {
    if (devices.size() < 2) return std::fprintf(stderr, "one device: two are needed\n"), 1;
    const devdl_native &other = devices[devices[0].device == first.device ? 1 : 0];
    void *view = device_dlview(app, &other);  // before the first link: its binary is kept for the view
    if (!view) return failed("device_dlview");
    const auto linking = Clock::now();
    void *kernel = device_dlsym(app, "AppKernel");
    if (!kernel || !launch(first, kernel)) return failed("the first device's kernel");
    const long long firstNs = nanoseconds(linking);
    const auto start = Clock::now();
    kernel = device_dlsym(view, "AppKernel");
    if (!kernel || !launch(other, kernel)) return failed("the second device's kernel");
    std::printf("%lld first=%lld\n", nanoseconds(start), firstNs);
    return 0;
  }
  if (mode == "devices") {
    const size_t count = argc > 4 ? std::strtoul(argv[4], nullptr, 10) : devices.size();
    if (devices.size() < count) return std::fprintf(stderr, "%zu devices, %zu asked for\n", devices.size(), count), 1;
    // The GPUs' primary contexts are the program's, made before (the driver takes about 100 ms a
    // GPU for one): what is timed is devdl's.
    for (size_t d = 0; d < count && first.backend == DEVDL_BACKEND_CUDA; ++d) {
      cuda::CUcontext context = nullptr;
      cuda::driver()->cuDevicePrimaryCtxRetain(&context, static_cast<int>(reinterpret_cast<intptr_t>(devices[d].device)));
    }
    const auto start = Clock::now();
    for (size_t d = 0; d < count; ++d) {
      void *view = device_dlview(app, &devices[d]);
      void *kernel = view ? device_dlsym(view, "AppKernel") : nullptr;
      if (!kernel || !launch(devices[d], kernel)) return failed("a device's first kernel");
    }
    std::printf("%lld\n", nanoseconds(start));
    return 0;
  }
  return std::fprintf(stderr, "unknown mode %s\n", mode.c_str()), 2;
}

// ---- the benchmarks -----------------------------------------------------------------------------

std::vector<std::string> images() {
  return onCuda ? std::vector<std::string>{image("lib.cubin"), image("app.cubin")}
                : std::vector<std::string>{image("lib.spv"), image("app.spv")};
}

std::vector<std::string> environment(size_t devices) {
  std::vector<std::string> env{onCuda ? "DEVDL_BACKEND=cuda" : "DEVDL_BACKEND=opencl"};
  if (!onCuda) {
    std::string pocl = "POCL_DEVICES=pthread";
    for (size_t i = 1; i < devices; ++i) pocl += " pthread";
    env.push_back(pocl);
  }
  return env;
}

std::vector<std::string> args(const std::string &mode, const std::string &extra = "") {
  std::vector<std::string> all{mode};
  for (const std::string &path : images()) all.push_back(path);
  if (!extra.empty()) all.push_back(extra);
  return all;
}

void BM_SecondDeviceFirstKernel(benchmark::State &state) {
  const std::string dir = std::filesystem::temp_directory_path() / ("devdl-bench-devices-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::vector<std::string> warm = environment(2);
  warm.push_back("DEVDL_CACHE_DIR=" + dir);
  warm.push_back("DEVDL_CACHE=1");
  std::vector<std::string> cold = environment(2);
  cold.push_back("DEVDL_CACHE=0");
  std::string error;
  if (runChild(args("hit"), warm, &error) < 0) {  // fills the cache
    state.SkipWithError(error.c_str());
    return;
  }
  double hits = 0, seconds = 0, firsts = 0;
  for (auto _ : state) {
    std::map<std::string, double> fields;
    const double second = runChild(args("second"), cold, &error, &fields);
    const double hit = second < 0 ? -1 : runChild(args("hit"), warm, &error);
    if (second < 0 || hit < 0) {
      state.SkipWithError(error.c_str());
      break;
    }
    state.SetIterationTime(second / 1e9);
    seconds += second;
    hits += hit;
    firsts += fields["first"];
  }
  std::filesystem::remove_all(dir);
  const double n = static_cast<double>(state.iterations());
  if (n == 0 || hits == 0) return;
  state.counters["hit ms"] = hits / n / 1e6;
  state.counters["first device ms"] = firsts / n / 1e6;
  state.counters["vs hit"] = seconds / hits;
}

void BM_DevicesSetUp(benchmark::State &state) {
  const auto count = static_cast<size_t>(state.range(0));
  std::vector<std::string> env = environment(count);
  env.push_back("DEVDL_CACHE=0");
  double total = 0;
  for (auto _ : state) {
    std::string error;
    const double ns = runChild(args("devices", std::to_string(count)), env, &error);
    if (ns < 0) {
      state.SkipWithError(error.c_str());
      break;
    }
    state.SetIterationTime(ns / 1e9);
    total += ns;
  }
  const double n = static_cast<double>(state.iterations());
  if (n > 0) state.counters["per device ms"] = total / n / 1e6 / static_cast<double>(count);
}

}  // namespace

int main(int argc, char **argv) {
  if (argc > 1 && std::strcmp(argv[1], "--child") == 0) return child(argc - 1, argv + 1);
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--cuda") == 0) onCuda = true;
  int gpus = 0;
  if (onCuda && cuda::driver()) cuda::driver()->cuDeviceGetCount(&gpus);
  benchmark::Initialize(&argc, argv);
  benchmark::RegisterBenchmark("BM_SecondDeviceFirstKernel", BM_SecondDeviceFirstKernel)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->Iterations(9);
  for (int devices : {1, 2, 4, 8})
    if (!onCuda || devices <= gpus)
      benchmark::RegisterBenchmark("BM_DevicesSetUp", BM_DevicesSetUp)
          ->Arg(devices)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Iterations(5);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
