// CUDA time to first kernel (issue 4), devdl against the driver by hand, in one run on the GPU:
//
// devdl: device_dlopen(lib.cubin, GLOBAL), device_dlopen(app.cubin), device_dlsym(AppKernel),
// one launch, then both closed, so that no program survives into the next iteration.
// By hand: read both files, cuLinkCreate (with log buffers, as devdl), cuLinkAddData of each,
// cuLinkComplete, cuModuleLoadData, cuLinkDestroy, cuModuleGetFunction, one launch,
// cuModuleUnload. Both in the same (primary) context.
// Second handle: with lib and app open and linked, a copy of app.cubin at another path opened
// as a new handle and its AppKernel found: the program linked for the first is reused (/2
// times the device_dlsym alone).
// Each in two forms, /0 from the files (as a program would) and /1 from memory (the images
// read once, device_dlopen_mem; the driver by hand links the same buffers): the second
// leaves out the file system, which is slow on some machines.

// Side by side: both in every iteration, in turns, each timed on its own; the ratio of their
// means is the figure (the machine drifts more between runs than devdl differs from by hand).
// Phases (open, link, launch, unload) are counters of the separate benchmarks.
//
// Links libdevdl.so alone (it is carried to the GPU machine with it). Needs the test images:
// run from the build directory, or pass DEVDL_TEST_IMAGES=<dir>.
#include "devdl.h"
#include "e2e/cuda_driver.h"

#include <benchmark/benchmark.h>
#include <link.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace {

namespace cuda = devdl::test::cuda;

std::string image(const char *name) {
  const char *dir = std::getenv("DEVDL_TEST_IMAGES");
  return std::string(dir ? dir : "tests/images") + "/" + name;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The driver and devdl's context, or a skip message.
const cuda::Driver *setUp(benchmark::State &state, cuda::CUcontext &context) {
  std::string why;
  const cuda::Driver *cu = cuda::driver(&why);
  devdl_native native{};
  native.size = sizeof native;
  native.backend = DEVDL_BACKEND_CUDA;
  if (!cu || device_dlnative(&native) != 0) {
    state.SkipWithError(cu ? device_dlerror() : why.c_str());
    return nullptr;
  }
  context = static_cast<cuda::CUcontext>(native.context);
  return cu;
}

// How often the host loader's list of objects changed (dlpi_adds + dlpi_subs): each change
// makes devdl look at the process's objects again.
uint64_t loadedObjectsChanges() {
  uint64_t changes = 0;
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *data) {
        *static_cast<uint64_t *>(data) = info->dlpi_adds + info->dlpi_subs;
        return 1;
      },
      &changes);
  return changes;
}

bool launchOnce(const cuda::Driver &cu, cuda::CUcontext context, void *kernel) {
  static cuda::CUdeviceptr buffer = 0;
  cu.cuCtxPushCurrent(context);
  if (!buffer) cu.cuMemAlloc(&buffer, sizeof(int));
  void *args[] = {&buffer};
  const bool ok = cu.cuLaunchKernel(static_cast<cuda::CUfunction>(kernel), 1, 1, 1, 1, 1, 1, 0, nullptr, args,
                                    nullptr) == cuda::CUDA_SUCCESS &&
                  cu.cuCtxSynchronize() == cuda::CUDA_SUCCESS;
  cuda::CUcontext popped;
  cu.cuCtxPopCurrent(&popped);
  return ok;
}

// Opens an image from its file, or from `bytes` (already read) in memory.
void *openImage(bool fromFile, const std::string &path, const std::string &bytes, int flags) {
  if (fromFile) return device_dlopen(path.c_str(), flags);
  return device_dlopen_mem(bytes.data(), bytes.size(), path.c_str(), flags);
}

void BM_CudaDevdlOpenClose(benchmark::State &state) {
  const std::string lib = image("lib.cubin"), app = image("app.cubin");
  const std::string libBytes = readFile(lib), appBytes = readFile(app);
  for (auto _ : state) {
    void *l = openImage(state.range(0) == 0, lib, libBytes, DEVDL_LAZY | DEVDL_GLOBAL);
    void *a = openImage(state.range(0) == 0, app, appBytes, DEVDL_LAZY);
    if (!l || !a) {
      state.SkipWithError(device_dlerror());
      break;
    }
    device_dlclose(a);
    device_dlclose(l);
  }
}

// Splits an iteration into phases, reported as counters: the mean microseconds of each.
class Phases {
 public:
  void start() { last_ = std::chrono::steady_clock::now(); }
  void mark(const char *phase) {
    const auto now = std::chrono::steady_clock::now();
    totals_[phase] += std::chrono::duration<double, std::micro>(now - last_).count();
    last_ = now;
  }
  void report(benchmark::State &state) const {
    for (const auto &[phase, total] : totals_)
      state.counters[phase] = benchmark::Counter(total, benchmark::Counter::kAvgIterations);
  }

 private:
  std::chrono::steady_clock::time_point last_;
  std::map<std::string, double> totals_;
};

// The seeds' example, from the files (/0) or from memory read once (/1).
struct Example {
  explicit Example(bool fromFiles)
      : fromFiles(fromFiles), lib(image("lib.cubin")), app(image("app.cubin")), libBytes(readFile(lib)),
        appBytes(readFile(app)) {}
  bool fromFiles;
  std::string lib, app, libBytes, appBytes;
};

// One first kernel through devdl: open both, find the kernel (the link), launch, close both.
bool devdlOnce(const cuda::Driver &cu, cuda::CUcontext context, const Example &example, Phases *phases) {
  if (phases) phases->start();
  void *l = openImage(example.fromFiles, example.lib, example.libBytes, DEVDL_LAZY | DEVDL_GLOBAL);
  void *a = openImage(example.fromFiles, example.app, example.appBytes, DEVDL_LAZY);
  if (phases) phases->mark("open");
  void *kernel = a ? device_dlsym(a, "AppKernel") : nullptr;
  if (phases) phases->mark("link");
  if (!l || !kernel || !launchOnce(cu, context, kernel)) return false;
  if (phases) phases->mark("launch");
  device_dlclose(a);
  device_dlclose(l);
  if (phases) phases->mark("unload");
  return true;
}

// The same by hand with the driver; `appFirst` adds the application's image first, as devdl's
// plan does.
bool byHandOnce(const cuda::Driver &cu, cuda::CUcontext context, const Example &example, bool appFirst,
                Phases *phases, std::string &log, Phases *calls = nullptr) {
  if (phases) phases->start();
  const std::string images[] = {example.fromFiles ? readFile(example.lib) : example.libBytes,
                                example.fromFiles ? readFile(example.app) : example.appBytes};
  const char *names[] = {"lib.cubin", "app.cubin"};
  const int order[2] = {appFirst ? 1 : 0, appFirst ? 0 : 1};
  std::string errorLog(16384, '\0'), infoLog(16384, '\0');
  cuda::CUjit_option options[] = {cuda::CU_JIT_ERROR_LOG_BUFFER, cuda::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                                  cuda::CU_JIT_INFO_LOG_BUFFER, cuda::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {errorLog.data(), reinterpret_cast<void *>(errorLog.size()), infoLog.data(),
                    reinterpret_cast<void *>(infoLog.size())};
  if (phases) phases->mark("open");
  // Each driver call timed where `calls` is given, to set beside DEVDL_DEBUG=statistics.
  auto mark = [&](const char *call) {
    if (calls) calls->mark(call);
  };
  if (calls) calls->start();
  cu.cuCtxPushCurrent(context);
  cuda::CUlinkState link = nullptr;
  bool ok = cu.cuLinkCreate(4, options, values, &link) == cuda::CUDA_SUCCESS;
  mark("cuLinkCreate");
  for (int i = 0; i < 2 && ok; ++i) {
    ok = cu.cuLinkAddData(link, cuda::CU_JIT_INPUT_CUBIN, const_cast<char *>(images[order[i]].data()),
                          images[order[i]].size(), names[order[i]], 0, nullptr, nullptr) == cuda::CUDA_SUCCESS;
    mark(i == 0 ? "cuLinkAddData1" : "cuLinkAddData2");
  }
  void *cubin = nullptr;
  size_t size = 0;
  cuda::CUmodule module = nullptr;
  cuda::CUfunction kernel = nullptr;
  ok = ok && cu.cuLinkComplete(link, &cubin, &size) == cuda::CUDA_SUCCESS;
  mark("cuLinkComplete");
  ok = ok && cu.cuModuleLoadData(&module, cubin) == cuda::CUDA_SUCCESS;
  mark("cuModuleLoadData");
  cu.cuLinkDestroy(link);
  mark("cuLinkDestroy");
  ok = ok && cu.cuModuleGetFunction(&kernel, module, "AppKernel") == cuda::CUDA_SUCCESS;
  mark("cuModuleGetFunction");
  cuda::CUcontext popped;
  cu.cuCtxPopCurrent(&popped);
  if (phases) phases->mark("link");
  ok = ok && launchOnce(cu, context, kernel);
  if (phases) phases->mark("launch");
  if (!ok) {
    log = errorLog.c_str();
    return false;
  }
  if (calls) calls->start();
  cu.cuCtxPushCurrent(context);
  cu.cuModuleUnload(module);
  cu.cuCtxPopCurrent(&popped);
  mark("cuModuleUnload");
  if (phases) phases->mark("unload");
  return true;
}

void BM_CudaDevdlFirstKernel(benchmark::State &state) {
  cuda::CUcontext context;
  const cuda::Driver *cu = setUp(state, context);
  if (!cu) return;
  const Example example(state.range(0) == 0);
  Phases phases;
  for (auto _ : state)
    if (!devdlOnce(*cu, context, example, &phases)) {
      state.SkipWithError(device_dlerror());
      break;
    }
  phases.report(state);
}

void BM_CudaByHandFirstKernel(benchmark::State &state) {
  cuda::CUcontext context;
  const cuda::Driver *cu = setUp(state, context);
  if (!cu) return;
  const Example example(state.range(0) == 0);
  const uint64_t changesBefore = loadedObjectsChanges();
  Phases phases, calls;
  std::string log;
  for (auto _ : state)
    if (!byHandOnce(*cu, context, example, state.range(1) != 0, &phases, log, &calls)) {
      state.SkipWithError(("link by hand failed: " + log).c_str());
      break;
    }
  phases.report(state);
  calls.report(state);
  state.counters["objects_changed"] =
      benchmark::Counter(static_cast<double>(loadedObjectsChanges() - changesBefore), benchmark::Counter::kAvgIterations);
}

// Both in each iteration, in turns (devdl first in even iterations), each timed on its own: the
// machine's drift, larger than the difference, falls on both alike. Counters: the mean of each,
// and their ratio.
void BM_CudaFirstKernelSideBySide(benchmark::State &state) {
  cuda::CUcontext context;
  const cuda::Driver *cu = setUp(state, context);
  if (!cu) return;
  const Example example(state.range(0) == 0);
  double devdl = 0, byHand = 0;
  std::string log;
  int64_t n = 0;
  for (auto _ : state) {
    for (int turn = 0; turn < 2; ++turn) {
      const bool devdlNow = (turn == 0) == (n % 2 == 0);
      const auto start = std::chrono::steady_clock::now();
      const bool ok = devdlNow ? devdlOnce(*cu, context, example, nullptr)
                               : byHandOnce(*cu, context, example, /*appFirst=*/true, nullptr, log);
      (devdlNow ? devdl : byHand) += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
      if (!ok) {
        state.SkipWithError(devdlNow ? device_dlerror() : ("link by hand failed: " + log).c_str());
        return;
      }
    }
    ++n;
  }
  state.counters["devdl_us"] = benchmark::Counter(devdl, benchmark::Counter::kAvgIterations);
  state.counters["by_hand_us"] = benchmark::Counter(byHand, benchmark::Counter::kAvgIterations);
  state.counters["ratio"] = byHand > 0 ? devdl / byHand : 0;
}

void BM_CudaDevdlSecondHandle(benchmark::State &state) {
  cuda::CUcontext context;
  const cuda::Driver *cu = setUp(state, context);
  if (!cu) return;
  const std::string copy = (std::filesystem::temp_directory_path() / "devdl-bench-app-copy.cubin").string();
  std::filesystem::copy_file(image("app.cubin"), copy, std::filesystem::copy_options::overwrite_existing);
  void *l = device_dlopen(image("lib.cubin").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  void *a = device_dlopen(image("app.cubin").c_str(), DEVDL_LAZY);
  void *first = a ? device_dlsym(a, "AppKernel") : nullptr;
  if (!l || !first) {
    state.SkipWithError(device_dlerror());
    return;
  }
  const std::string copyBytes = readFile(copy);
  // Argument 2: the lookup alone is timed (the kernel through the new handle), not the open.
  const bool lookupOnly = state.range(0) == 2;
  if (lookupOnly) state.SetLabel("device_dlsym alone");
  for (auto _ : state) {
    void *again = openImage(state.range(0) == 0, copy, copyBytes, DEVDL_LAZY);
    const auto start = std::chrono::steady_clock::now();
    void *kernel = again ? device_dlsym(again, "AppKernel") : nullptr;
    if (lookupOnly)
      state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (kernel != first) {
      state.SkipWithError("the second handle did not reuse the program");
      break;
    }
    device_dlclose(again);
  }
  device_dlclose(a);
  device_dlclose(l);
  std::filesystem::remove(copy);
}

// What making devdl's context current for a driver call costs (devdl does it around each
// call it makes: link, kernel lookup, unload).
void BM_CudaContextPushPop(benchmark::State &state) {
  cuda::CUcontext context;
  const cuda::Driver *cu = setUp(state, context);
  if (!cu) return;
  for (auto _ : state) {
    cuda::CUcontext popped;
    cu->cuCtxPushCurrent(context);
    cu->cuCtxPopCurrent(&popped);
  }
}

BENCHMARK(BM_CudaContextPushPop)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CudaDevdlFirstKernel)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->MinTime(1.0);
BENCHMARK(BM_CudaByHandFirstKernel)->ArgsProduct({{0, 1}, {0, 1}})->Unit(benchmark::kMicrosecond)->MinTime(1.0);
BENCHMARK(BM_CudaFirstKernelSideBySide)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->MinTime(2.0);
BENCHMARK(BM_CudaDevdlSecondHandle)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CudaDevdlSecondHandle)->Arg(2)->Unit(benchmark::kMicrosecond)->UseManualTime();
BENCHMARK(BM_CudaDevdlOpenClose)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char **argv) {
  setenv("DEVDL_CACHE", "0", 1);  // every first kernel is a link (bench_cache measures the disk cache)
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
