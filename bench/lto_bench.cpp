// Kernel time with and without load-time LTO (issue 18): an application kernel calling into a
// separately compiled library in its hot loop, as
//   whole          one source file compiled whole: the limit (CUDA: nvcc's cubin loaded by hand;
//                  OpenCL: one SPIR-V image through devdl, nothing to link);
//   culink         CUDA: -rdc cubins linked by devdl with the driver's cuLink (devdl without nvJitLink);
//   nvjitlink_lto  CUDA: nvcc -dlto fatbins linked by devdl with nvJitLink -lto;
//   nvjitlink      CUDA: the same fatbins with DEVDL_CUDA_LINKER=nvjitlink DEVDL_LTO=0 (their PTX as compiled);
//   lto, no_lto    OpenCL: two SPIR-V images linked by devdl as it links for the device (on PoCL,
//                  translated to SPIR; on Intel's runtime, each compiled and linked by clLinkProgram),
//                  with and without LLVM's optimization across them (DEVDL_LTO=1 and 0: on the
//                  SPIR path it runs only when asked);
//   il             OpenCL, on a device that takes IL: devdl's software link of the two, optimized
//                  across them (backend::linkSpirv, backend::optimizeSpirv) and built as one IL
//                  program, whether or not the device has a linker of its own.
// And the price of one instance of a library's variables (issue 51): a kernel stepping a library's
// variable in its hot loop through the library's function, as
//   one_program    the library linked into the application's program, which holds the instance;
//   reached        the library's own kernel linked first (DEVDL_BENCH_FIRST_KERNEL), so that the
//                  application's program reaches the instance in that one through its cell
// (CUDA: from PTX, and from LTO-IR fat binaries, whose PTX is linked where the instance is reached).
// The linker and LTO are chosen per process, so each way runs in a process of its own, in turns;
// each times its launches after a warm-up one and prints nanoseconds per launch and a checksum
// of the output, which must agree with the limit's (the same computation ran).
//
//   bench_lto                            both backends (each skips, saying why, without a device)
//   bench_lto --child cuda|opencl KERNEL ITERATIONS THREADS devdl IMAGE... | binary FILE | il IMAGE...
//
// Needs the images bench/CMakeLists.txt makes (CUDA's with nvcc): run from the build directory,
// or pass DEVDL_TEST_IMAGES=<dir>.
#include "backend/spirv/link.h"
#include "backend/spirv/translation.h"
#include "child_process.h"
#include "devdl.h"
#include "image/read_image.h"
#include "e2e/cuda_driver.h"

#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace cuda = devdl::test::cuda;
using devdl::bench::median;
using devdl::bench::runChild;

std::string image(const std::string &name) {
  const char *dir = std::getenv("DEVDL_TEST_IMAGES");
  return std::string(dir ? dir : "bench/images") + "/" + name;
}

// ---- the child: one program, its kernel timed -------------------------------------------------

// The kernel of the images opened as a program opens its libraries: all but the last
// DEVDL_GLOBAL, the kernel from the last.
// With DEVDL_BENCH_FIRST_KERNEL, that kernel of the first image is looked up (linked) before the
// others are opened.
void *devdlKernel(int images, char **paths, const char *name) {
  void *handle = nullptr;
  const char *first = std::getenv("DEVDL_BENCH_FIRST_KERNEL");
  for (int i = 0; i < images; ++i) {
    if (!(handle = device_dlopen(paths[i], i + 1 < images ? DEVDL_LAZY | DEVDL_GLOBAL : DEVDL_NOW))) return nullptr;
    if (i == 0 && first && *first && !device_dlsym(handle, first)) return nullptr;
  }
  return device_dlsym(handle, name);
}

// Times `launches` calls of `launch` (each queues one run of the kernel) after a warm-up one,
// `finish` waiting for the device; prints ns per launch and the checksum `read` gives.
int timeLaunches(unsigned launches, const std::function<bool()> &launch, const std::function<bool()> &finish,
                 const std::function<double()> &read) {
  if (!launch() || !finish()) return std::fprintf(stderr, "warm-up launch failed\n"), 1;
  const auto start = std::chrono::steady_clock::now();
  for (unsigned i = 0; i < launches; ++i)
    if (!launch()) return std::fprintf(stderr, "launch failed\n"), 1;
  if (!finish()) return std::fprintf(stderr, "the device failed\n"), 1;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  std::printf("%lld checksum=%.9g\n", static_cast<long long>(ns / launches), read());
  return 0;
}

int cudaChild(const std::string &kernelName, int iterations, unsigned threads, const std::string &mode, int files,
              char **paths) {
  devdl_native native{};
  native.size = sizeof native;
  if (device_dlnative(&native) != 0) return std::fprintf(stderr, "%s\n", device_dlerror()), 1;
  std::string why;
  const cuda::Driver *cu = cuda::driver(&why);
  if (!cu) return std::fprintf(stderr, "%s\n", why.c_str()), 1;
  cu->cuCtxPushCurrent(static_cast<cuda::CUcontext>(native.context));
  cuda::CUfunction kernel = nullptr;
  if (mode == "devdl") {
    kernel = static_cast<cuda::CUfunction>(devdlKernel(files, paths, kernelName.c_str()));
    if (!kernel) return std::fprintf(stderr, "%s\n", device_dlerror()), 1;
  } else {
    std::ifstream in(paths[0], std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    const std::string binary = bytes.str();
    cuda::CUmodule module = nullptr;
    if (cu->cuModuleLoadData(&module, binary.data()) != cuda::CUDA_SUCCESS ||
        cu->cuModuleGetFunction(&kernel, module, kernelName.c_str()) != cuda::CUDA_SUCCESS)
      return std::fprintf(stderr, "loading %s by hand failed\n", paths[0]), 1;
  }
  cuda::CUdeviceptr out = 0;
  if (cu->cuMemAlloc(&out, threads * sizeof(float)) != cuda::CUDA_SUCCESS) return std::fprintf(stderr, "cuMemAlloc\n"), 1;
  void *args[] = {&out, &iterations};
  constexpr unsigned kBlock = 256;
  return timeLaunches(
      10,
      [&] {
        return cu->cuLaunchKernel(kernel, threads / kBlock, 1, 1, kBlock, 1, 1, 0, nullptr, args, nullptr) ==
               cuda::CUDA_SUCCESS;
      },
      [&] { return cu->cuCtxSynchronize() == cuda::CUDA_SUCCESS; },
      [&] {
        std::vector<float> values(threads);
        cu->cuMemcpyDtoH(values.data(), out, values.size() * sizeof(float));
        double sum = 0;
        for (float v : values) sum += v;
        return sum;
      });
}

// The images linked by devdl's software link, optimized across them and built as one IL program
// on `device`: what devdl hands a device that takes IL without a linker.
cl_kernel softwareLinkedKernel(cl_context context, cl_device_id device, int files, char **paths, const char *name) {
  std::vector<devdl::ImageFile> read;
  std::vector<const devdl::DeviceImage *> images;
  std::vector<std::string> labels;
  for (int i = 0; i < files; ++i) {
    auto file = devdl::readImageFile(paths[i]);
    if (!file) return std::fprintf(stderr, "%s\n", llvm::toString(file.takeError()).c_str()), nullptr;
    read.push_back(std::move(*file));
    labels.push_back(paths[i]);
  }
  for (const devdl::ImageFile &file : read) images.push_back(&file.images[0]);
  auto linked = devdl::backend::linkSpirv(images, labels);
  auto optimized = linked ? devdl::backend::optimizeSpirv(*linked) : linked.takeError();
  if (!optimized) return std::fprintf(stderr, "%s\n", llvm::toString(optimized.takeError()).c_str()), nullptr;
  cl_int err = CL_SUCCESS;
  cl_program program = clCreateProgramWithIL(context, optimized->data(), optimized->size() * 4, &err);
  if (err != CL_SUCCESS || clBuildProgram(program, 1, &device, "", nullptr, nullptr) != CL_SUCCESS)
    return std::fprintf(stderr, "clCreateProgramWithIL or clBuildProgram failed\n"), nullptr;
  cl_kernel kernel = clCreateKernel(program, name, &err);
  return err == CL_SUCCESS ? kernel : nullptr;
}

int openClChild(const std::string &kernelName, int iterations, unsigned threads, const std::string &mode, int files,
                char **paths) {
  devdl_native native{};
  native.size = sizeof native;
  if (device_dlnative(&native) != 0) return std::fprintf(stderr, "%s\n", device_dlerror()), 1;
  auto context = static_cast<cl_context>(native.context);
  auto device = static_cast<cl_device_id>(native.device);
  auto kernel = mode == "il" ? softwareLinkedKernel(context, device, files, paths, kernelName.c_str())
                             : static_cast<cl_kernel>(devdlKernel(files, paths, kernelName.c_str()));
  if (!kernel) return std::fprintf(stderr, "%s\n", mode == "il" ? "the software link failed" : device_dlerror()), 1;
  cl_command_queue queue = clCreateCommandQueueWithProperties(context, device, nullptr, nullptr);
  cl_mem out = clCreateBuffer(context, CL_MEM_WRITE_ONLY, threads * sizeof(float), nullptr, nullptr);
  if (!queue || !out || clSetKernelArg(kernel, 0, sizeof out, &out) != CL_SUCCESS ||
      clSetKernelArg(kernel, 1, sizeof iterations, &iterations) != CL_SUCCESS)
    return std::fprintf(stderr, "OpenCL set-up failed\n"), 1;
  const size_t global = threads;
  return timeLaunches(
      3,
      [&] { return clEnqueueNDRangeKernel(queue, kernel, 1, nullptr, &global, nullptr, 0, nullptr, nullptr) == CL_SUCCESS; },
      [&] { return clFinish(queue) == CL_SUCCESS; },
      [&] {
        std::vector<float> values(threads);
        clEnqueueReadBuffer(queue, out, CL_TRUE, 0, values.size() * sizeof(float), values.data(), 0, nullptr, nullptr);
        double sum = 0;
        for (float v : values) sum += v;
        return sum;
      });
}

int child(int argc, char **argv) {
  if (argc < 6)
    return std::fprintf(stderr,
                        "usage: --child cuda|opencl KERNEL ITERATIONS THREADS devdl IMAGE... | binary FILE | il IMAGE...\n"),
           2;
  const std::string backend = argv[0], mode = argv[4];
  setenv("DEVDL_BACKEND", backend.c_str(), 1);
  const int iterations = std::atoi(argv[2]);
  const auto threads = static_cast<unsigned>(std::atoi(argv[3]));
  return backend == "cuda" ? cudaChild(argv[1], iterations, threads, mode, argc - 5, argv + 5)
                           : openClChild(argv[1], iterations, threads, mode, argc - 5, argv + 5);
}

// ---- the runner ---------------------------------------------------------------------------------

struct Way {
  const char *name;
  std::vector<std::string> load;  // devdl IMAGE... | binary FILE | il IMAGE...
  std::vector<std::string> env;
  bool timed = false;             // the one Google Benchmark's time reports
  const char *against = nullptr;  // another way it is reported against, besides the limit
};

void kernelTime(benchmark::State &state, const std::string &backend, const std::vector<Way> &ways,
                const std::string &kernel, int iterations, unsigned threads) {
  std::vector<std::vector<double>> times(ways.size());
  size_t turn = 0;
  for (auto _ : state) {
    double timed = 0, reference = NAN;
    for (size_t k = 0; k < ways.size(); ++k) {
      const size_t w = (turn + k) % ways.size();  // a different one first each time
      std::vector<std::string> args = {backend, kernel, std::to_string(iterations), std::to_string(threads)};
      args.insert(args.end(), ways[w].load.begin(), ways[w].load.end());
      std::vector<std::string> env = ways[w].env;
      env.push_back("DEVDL_CACHE=0");  // each links: the kernel is what is timed, not the load
      std::string error;
      std::map<std::string, double> fields;
      const double ns = runChild(args, env, &error, &fields);
      if (ns < 0) {
        state.SkipWithError(error.c_str());
        return;
      }
      // Every way must compute what the others compute (to float rounding: LTO may fuse).
      const double checksum = fields["checksum"];
      if (std::isnan(reference)) reference = checksum;
      if (std::fabs(checksum - reference) > 1e-4 * std::fabs(reference) + 1e-3) {
        state.SkipWithError(("outputs differ: " + std::string(ways[w].name) + " " + std::to_string(checksum) +
                             " against " + std::to_string(reference)).c_str());
        return;
      }
      times[w].push_back(ns);
      if (ways[w].timed) timed = ns;
    }
    ++turn;
    state.SetIterationTime(timed / 1e9);
  }
  const double limit = median(times[0]);
  for (size_t w = 0; w < ways.size(); ++w) {
    state.counters[std::string(ways[w].name) + "_ms"] = median(times[w]) / 1e6;
    if (w) state.counters[std::string(ways[w].name) + "_over_whole"] = median(times[w]) / limit;
    for (size_t a = 0; ways[w].against && a < ways.size(); ++a)
      if (std::string(ways[a].name) == ways[w].against)
        state.counters[std::string(ways[w].name) + "_over_" + ways[a].name] = median(times[w]) / median(times[a]);
  }
  state.SetLabel("medians of " + std::to_string(times[0].size()) + " processes each, " + std::to_string(threads) +
                 " threads x " + std::to_string(iterations) + " iterations");
}

void cudaKernelTime(benchmark::State &state, const std::string &lib, const std::string &app, const std::string &whole,
                    const std::string &kernel, int iterations) {
  if (std::string why; !cuda::driver(&why)) {
    state.SkipWithError(why.c_str());
    return;
  }
  const std::vector<Way> ways = {
      {"whole", {"binary", image(whole + ".cubin")}, {}},
      {"culink", {"devdl", image(lib + ".cubin"), image(app + ".cubin")}, {"DEVDL_CUDA_LINKER=culink"}},
      {"nvjitlink_lto", {"devdl", image(lib + ".lto.fatbin"), image(app + ".lto.fatbin")}, {}, true},
      {"nvjitlink", {"devdl", image(lib + ".lto.fatbin"), image(app + ".lto.fatbin")},
       {"DEVDL_CUDA_LINKER=nvjitlink", "DEVDL_LTO=0"}},
  };
  kernelTime(state, "cuda", ways, kernel, iterations, 262144);
}

// The variable case: linked into one program with the library, and reaching the instance the
// library's own program holds.
void BM_CudaKernelSteppingALibrarysVariable(benchmark::State &state) {
  if (std::string why; !cuda::driver(&why)) {
    state.SkipWithError(why.c_str());
    return;
  }
  const std::string first = "DEVDL_BENCH_FIRST_KERNEL=SlotsRead";
  const std::vector<Way> ways = {
      {"whole", {"binary", image("var_whole.cubin")}, {}},
      {"one_program", {"devdl", image("var_lib.ptx"), image("var_app.ptx")}, {}},
      {"reached", {"devdl", image("var_lib.ptx"), image("var_app.ptx")}, {first}, true, "one_program"},
      {"one_program_lto", {"devdl", image("var_lib.lto.fatbin"), image("var_app.lto.fatbin")}, {}},
      {"reached_lto", {"devdl", image("var_lib.lto.fatbin"), image("var_app.lto.fatbin")}, {first}, false,
       "one_program_lto"},
  };
  kernelTime(state, "cuda", ways, "SlotsKernel", 20000, 262144);
}

// No one source file here (bench/CMakeLists.txt says why): the program linked with the library is
// the limit.
void BM_OpenClKernelSteppingALibrarysVariable(benchmark::State &state) {
  const std::string first = "DEVDL_BENCH_FIRST_KERNEL=SlotsRead";
  const std::vector<Way> ways = {
      {"one_program", {"devdl", image("var_lib.spv"), image("var_app.spv")}, {}},
      {"reached", {"devdl", image("var_lib.spv"), image("var_app.spv")}, {first}, true, "one_program"},
  };
  kernelTime(state, "opencl", ways, "SlotsKernel", 2000, 65536);
}

// Whether devdl's OpenCL device (OCL_ICD_VENDORS picks it) takes SPIR-V IL.
bool openClTakesIl() {
  devdl_native native{};
  native.size = sizeof native;
  native.backend = DEVDL_BACKEND_OPENCL;
  if (device_dlnative(&native) != 0) return false;
  char version[256] = {};
  clGetDeviceInfo(static_cast<cl_device_id>(native.device), CL_DEVICE_IL_VERSION, sizeof version - 1, version, nullptr);
  return std::string(version).find("SPIR-V") != std::string::npos;
}

void openClKernelTime(benchmark::State &state, const std::string &lib, const std::string &app,
                      const std::string &whole, const std::string &kernel, int iterations) {
  std::vector<Way> ways = {
      {"whole", {"devdl", image(whole + ".spv")}, {}},
      {"lto", {"devdl", image(lib + ".spv"), image(app + ".spv")}, {"DEVDL_LTO=1"}, true},
      {"no_lto", {"devdl", image(lib + ".spv"), image(app + ".spv")}, {"DEVDL_LTO=0"}},
  };
  if (openClTakesIl()) ways.push_back({"il", {"il", image(lib + ".spv"), image(app + ".spv")}, {}});
  kernelTime(state, "opencl", ways, kernel, iterations, 65536);
}

// Two small functions (a multiply-add, an add) called in the loop; a dozen math functions
// (sinf, expf, erff, hypotf, ...).
void BM_CudaKernelCallingASmallLibrary(benchmark::State &state) {
  cudaKernelTime(state, "lto_lib", "lto_app", "lto_whole", "LtoKernel", 20000);
}
void BM_CudaKernelCallingAMathLibrary(benchmark::State &state) {
  cudaKernelTime(state, "lto_math_lib", "lto_math_app", "lto_math_whole", "LtoMathKernel", 500);
}
void BM_OpenClKernelCallingASmallLibrary(benchmark::State &state) {
  openClKernelTime(state, "lto_lib", "lto_app", "lto_whole", "LtoKernel", 2000);
}
void BM_OpenClKernelCallingAMathLibrary(benchmark::State &state) {
  openClKernelTime(state, "lto_math_lib", "lto_math_app", "lto_math_whole", "LtoMathKernel", 50);
}

BENCHMARK(BM_CudaKernelCallingASmallLibrary)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_CudaKernelCallingAMathLibrary)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_OpenClKernelCallingASmallLibrary)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_OpenClKernelCallingAMathLibrary)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_CudaKernelSteppingALibrarysVariable)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_OpenClKernelSteppingALibrarysVariable)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);

}  // namespace

int main(int argc, char **argv) {
  if (argc > 1 && std::string_view(argv[1]) == "--child") return child(argc - 2, argv + 2);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
