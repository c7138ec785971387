// Time to first kernel in a fresh process (issue 5): the seeds' example (lib + app, AppKernel;
// on CUDA also with an 800 KB library in place of the seed's few hundred bytes of code, and as
// PTX; for issue 18, -rdc cubins linked by the driver's cuLink against nvcc -dlto fatbins optimized
// together by nvJitLink) cold (DEVDL_CACHE=0: link and build), from devdl's disk cache, and by hand from the same
// binary (the limit: clCreateProgramWithBinary + clBuildProgram + clCreateKernel, or
// cuModuleLoadData + cuModuleGetFunction), and the floor of a hit (issue 21: the by-hand load after
// the reads and checks no hit that verifies what it loads can skip, with none of devdl's own work;
// floorRead below), each in a process of its own, side by side in every iteration (in turns), as
// the figure is a ratio and this machine drifts between runs.
//
// Each process (this program with --child) first opens the device (device_dlnative) and then
// times, on its own clock, from the first load call to the end of one launch of the kernel on
// one work-item; it prints the nanoseconds, those of each phase and the page faults taken.
// PoCL's kernel cache is off in every process (POCL_KERNEL_CACHE=0, and a fresh empty
// POCL_CACHE_DIR each), as is CUDA's JIT cache.
//
//   bench_cache                           both backends (each skips, saying why, without a device)
//   bench_cache --child opencl|cuda devdl LIB APP | binary FILE | floor LIB APP ENTRY KEYLOW KEYHIGH
//
// And for issue 21, 8 and 32 processes cold-starting the seeds' example together on one fresh
// cache (their CPU and wall time against one cold start, with the cache's build lock and
// without), and a second machine's first load from a Redis store the first one filled.
//
// Needs the test images: run from the build directory, or pass DEVDL_TEST_IMAGES=<dir>.
#include "backend/cuda/program_parts.h"
#include "backend/opencl/host_variables.h"
#include "backend/opencl/opencl_api.h"
#include "backend/packed_parts.h"
#include "store/disk_cache.h"
#include "store/image_summary.h"
#include "support/regular_file.h"
#include "support/xxh3.h"
#include "devdl.h"
#include "child_process.h"
#include "e2e/cuda_driver.h"
#include "redis_server.h"

#include <benchmark/benchmark.h>

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/MemoryBuffer.h>

#include <fcntl.h>
#include <link.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace {

namespace fs = std::filesystem;
namespace cuda = devdl::test::cuda;
using devdl::bench::median;
using devdl::bench::runChild;
using devdl::bench::runTogether;
using Clock = std::chrono::steady_clock;

std::string image(const std::string &name) {
  const char *dir = std::getenv("DEVDL_TEST_IMAGES");
  return std::string(dir ? dir : "tests/images") + "/" + name;
}

// The by-hand read as a careful program does it, and as devdl reads its entries: LLVM's, which
// maps files from 16 KB on and reads smaller ones with one pread. (A stream read char by char
// took 80 us for 5 KB and 3 ms for 800 KB, and flattered devdl.)
std::string_view readFile(const std::string &path, std::unique_ptr<llvm::MemoryBuffer> &keep) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buffer) return {};
  keep = std::move(*buffer);
  return std::string_view(keep->getBufferStart(), keep->getBufferSize());
}

// ---- the child: one first kernel, timed -------------------------------------------------------

bool launchOpenCl(const devdl::backend::opencl::Api &cl, const devdl_native &native, cl_kernel kernel) {
  auto context = static_cast<cl_context>(native.context);
  cl_command_queue queue =
      cl.clCreateCommandQueueWithProperties(context, static_cast<cl_device_id>(native.device), nullptr, nullptr);
  cl_mem buffer = cl.clCreateBuffer(context, CL_MEM_WRITE_ONLY, sizeof(int), nullptr, nullptr);
  const size_t one = 1;
  return cl.clSetKernelArg(kernel, 0, sizeof buffer, &buffer) == CL_SUCCESS &&
         cl.clEnqueueNDRangeKernel(queue, kernel, 1, nullptr, &one, nullptr, 0, nullptr, nullptr) == CL_SUCCESS &&
         cl.clFinish(queue) == CL_SUCCESS;
}

// The first launch in steps (`mark` each): a buffer's allocation, the launch until the kernel
// has run, and the copy back.
template <typename Mark>
bool launchCuda(const cuda::Driver &cu, const devdl_native &native, void *kernel, Mark mark) {
  auto context = static_cast<cuda::CUcontext>(native.context);
  if (cu.cuCtxPushCurrent(context) != cuda::CUDA_SUCCESS) return false;
  cuda::CUdeviceptr buffer = 0;
  bool ok = cu.cuMemAlloc(&buffer, sizeof(int)) == cuda::CUDA_SUCCESS;
  mark("alloc");
  void *args[] = {&buffer};
  ok = ok && cu.cuLaunchKernel(static_cast<cuda::CUfunction>(kernel), 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) ==
                 cuda::CUDA_SUCCESS;
  ok = ok && cu.cuCtxSynchronize() == cuda::CUDA_SUCCESS;
  mark("launch");
  int value = -1;
  ok = ok && cu.cuMemcpyDtoH(&value, buffer, sizeof value) == cuda::CUDA_SUCCESS;
  if (buffer) cu.cuMemFree(buffer);
  cuda::CUcontext popped;
  cu.cuCtxPopCurrent(&popped);
  mark("copy");
  return ok;
}

// The floor of a hit (`floor LIB APP ENTRY KEYLOW KEYHIGH`): the reads and checks that no hit
// verifying what it loads can do without, in as few system calls as devdl makes them and with
// none of the loader's own work: the process's objects listed (devdl looks for bundles in their
// notes), both images opened, and read as devdl reads a file and hashed as it keys them where
// they are smaller than a summary's worth (a larger one is known by its status and summary, whose
// read is left out) ("images"), the cache directory opened and the entry read and verified:
// header, key, checksum. The entry's binary is then loaded as by hand. Empty, with why in
// `error`, where one of them fails.
volatile uint64_t floorSink;  // what was read and hashed, so that none of it is left out

template <typename Mark>
std::string_view floorRead(int argc, char **argv, devdl::store::Entry &entry, std::string &error, Mark mark) {
  if (argc < 8) return error = "floor: LIB APP ENTRY KEYLOW KEYHIGH", std::string_view();
  uint64_t sink = 0;
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *data) {
        for (int i = 0; i < info->dlpi_phnum; ++i) *static_cast<uint64_t *>(data) += info->dlpi_phdr[i].p_type == PT_NOTE;
        return 0;
      },
      &sink);
  for (const char *path : {argv[3], argv[4]}) {
    auto file = devdl::RegularFile::open(path);
    if (!file) return error = llvm::toString(file.takeError()), std::string_view();
    if (static_cast<uint64_t>(file->status().st_size) >= devdl::store::kSummaryFrom) continue;
    auto bytes = file->read();
    if (!bytes) return error = llvm::toString(bytes.takeError()), std::string_view();
    sink ^= devdl::xxh3::hash128((*bytes)->getBufferStart(), (*bytes)->getBufferSize()).low;
  }
  floorSink = sink;
  mark("images");
  const std::string path = argv[5];
  const size_t slash = path.rfind('/');
  const int dir = open(path.substr(0, slash).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct stat st {};
  const int fd = dir >= 0 && fstat(dir, &st) == 0
                     ? openat(dir, path.c_str() + slash + 1, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
                     : -1;
  auto buffer = fd >= 0 && fstat(fd, &st) == 0
                    ? llvm::MemoryBuffer::getOpenFile(fd, path, st.st_size, /*RequiresNullTerminator=*/false)
                    : std::make_error_code(std::errc::no_such_file_or_directory);
  if (fd >= 0) close(fd);
  if (dir >= 0) close(dir);
  if (!buffer) return error = path + ": " + buffer.getError().message(), std::string_view();
  const devdl::store::Key key{std::strtoull(argv[6], nullptr, 16), std::strtoull(argv[7], nullptr, 16)};
  if (error = devdl::store::verifyEntry(std::move(*buffer), key, entry); !error.empty()) return {};
  return entry.binary();
}

int child(int argc, char **argv) {
  if (argc < 4)
    return std::fprintf(stderr, "usage: --child opencl|cuda devdl LIB APP | binary FILE | floor LIB APP ENTRY KEYLOW KEYHIGH\n"), 2;
  const std::string backend = argv[1], mode = argv[2];
  setenv("DEVDL_BACKEND", backend.c_str(), 1);
  devdl_native native{};
  native.size = sizeof native;
  if (device_dlnative(&native) != 0) return std::fprintf(stderr, "%s\n", device_dlerror()), 1;
  const cuda::Driver *cu = backend == "cuda" ? cuda::driver() : nullptr;
  auto clApi = devdl::backend::opencl::api();
  if (!clApi) llvm::consumeError(clApi.takeError());
  if (backend == "cuda" ? !cu : !clApi) return std::fprintf(stderr, "no %s driver\n", backend.c_str()), 1;

  rusage before{};
  getrusage(RUSAGE_SELF, &before);
  const auto start = Clock::now();
  auto last = start;
  std::string phases;  // " name=ns" each
  auto mark = [&](const char *phase) {
    const auto now = Clock::now();
    phases += std::string(" ") + phase + "=" +
              std::to_string(std::chrono::duration_cast<std::chrono::nanoseconds>(now - last).count());
    last = now;
  };
  void *kernel = nullptr;
  if (mode == "devdl") {
    void *lib = device_dlopen(argv[3], DEVDL_LAZY | DEVDL_GLOBAL);
    mark("open_lib");
    void *app = lib ? device_dlopen(argv[4], DEVDL_NOW) : nullptr;  // the program is made here
    mark("open_app");
    kernel = app ? device_dlsym(app, "AppKernel") : nullptr;
    mark("dlsym");
    if (!kernel) return std::fprintf(stderr, "%s\n", device_dlerror()), 1;
  } else if (backend == "opencl") {
    const auto &cl = *clApi;
    std::unique_ptr<llvm::MemoryBuffer> file;
    devdl::store::Entry entry;
    std::string error = "cannot read " + std::string(argv[3]);
    std::string_view binary = mode == "floor" ? floorRead(argc, argv, entry, error, mark) : readFile(argv[3], file);
    if (binary.empty()) return std::fprintf(stderr, "%s\n", error.c_str()), 1;
    if (mode == "floor") {  // the driver's binary, after devdl's header
      auto stored = devdl::backend::opencl::readStoredProgram(binary);
      if (!stored) return std::fprintf(stderr, "%s\n", llvm::toString(stored.takeError()).c_str()), 1;
      binary = stored->driverBinary;
    }
    // A program linked in parts (backend/opencl/opencl_parts.cpp): each part built, the kernel
    // taken from the one that holds it.
    std::vector<devdl::backend::PartBinary> parts;
    if (devdl::backend::isPackedParts(devdl::backend::opencl::kPackedPrograms, binary)) {
      auto unpacked = devdl::backend::unpackParts(devdl::backend::opencl::kPackedPrograms, binary, "OpenCL programs");
      if (!unpacked) return std::fprintf(stderr, "%s\n", llvm::toString(unpacked.takeError()).c_str()), 1;
      parts = std::move(*unpacked);
    } else {
      parts.push_back({std::string(binary), {"AppKernel"}});
    }
    mark("read");
    auto context = static_cast<cl_context>(native.context);
    auto device = static_cast<cl_device_id>(native.device);
    cl_int err = CL_SUCCESS;
    cl_program owner = nullptr;
    for (const auto &part : parts) {
      // PoCL's program of many kernels is kept as the SPIR it was built from.
      std::string_view code = part.binary;
      const bool spir = code.starts_with(devdl::backend::opencl::kStoredSpir);
      if (spir) code.remove_prefix(devdl::backend::opencl::kStoredSpir.size());
      const auto *bytes = reinterpret_cast<const unsigned char *>(code.data());
      const size_t size = code.size();
      cl_program program = cl.clCreateProgramWithBinary(context, 1, &device, &size, &bytes, nullptr, &err);
      if (err == CL_SUCCESS)
        err = cl.clBuildProgram(program, 1, &device, spir ? "-x spir -spir-std=1.2" : "", nullptr, nullptr);
      if (err != CL_SUCCESS) break;
      if (llvm::is_contained(part.names, "AppKernel")) owner = program;
    }
    mark("load");
    if (err == CL_SUCCESS) kernel = cl.clCreateKernel(owner, "AppKernel", &err);
    mark("kernel");
    if (err != CL_SUCCESS) return std::fprintf(stderr, "OpenCL by hand failed: %d\n", err), 1;
  } else {
    std::unique_ptr<llvm::MemoryBuffer> file;
    devdl::store::Entry entry;
    std::string error = "cannot read " + std::string(argv[3]);
    const std::string_view binary = mode == "floor" ? floorRead(argc, argv, entry, error, mark) : readFile(argv[3], file);
    if (binary.empty()) return std::fprintf(stderr, "%s\n", error.c_str()), 1;
    mark("read");
    auto context = static_cast<cuda::CUcontext>(native.context);
    // A program linked in parts (backend/cuda/program_parts.h): each module loaded, the kernel
    // taken from the one that holds it.
    std::vector<devdl::backend::cuda::PartModule> parts;
    if (devdl::backend::cuda::isPackedModules(binary)) {
      auto unpacked = devdl::backend::cuda::unpackModules(binary);
      if (!unpacked) return std::fprintf(stderr, "%s\n", llvm::toString(unpacked.takeError()).c_str()), 1;
      parts = std::move(*unpacked);
    } else {
      parts.push_back({std::string(binary), {"AppKernel"}});
    }
    cuda::CUmodule module = nullptr, owner = nullptr;
    cuda::CUfunction function = nullptr;
    cu->cuCtxPushCurrent(context);
    bool ok = true;
    for (const auto &part : parts) {
      ok = ok && cu->cuModuleLoadData(&module, part.binary.data()) == cuda::CUDA_SUCCESS;
      if (llvm::is_contained(part.names, "AppKernel")) owner = module;
    }
    mark("load");
    ok = ok && cu->cuModuleGetFunction(&function, owner, "AppKernel") == cuda::CUDA_SUCCESS;
    mark("kernel");
    cuda::CUcontext popped;
    cu->cuCtxPopCurrent(&popped);
    if (!ok) return std::fprintf(stderr, "CUDA by hand failed\n"), 1;
    kernel = function;
  }
  if (backend == "cuda" ? !launchCuda(*cu, native, kernel, mark)
                        : !launchOpenCl(*clApi, native, static_cast<cl_kernel>(kernel)))
    return std::fprintf(stderr, "launch failed\n"), 1;
  if (backend != "cuda") mark("launch");
  rusage after{};
  getrusage(RUSAGE_SELF, &after);
  phases += " page_faults=" + std::to_string(after.ru_minflt - before.ru_minflt + after.ru_majflt - before.ru_majflt);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(last - start).count();
  std::printf("%lld%s\n", static_cast<long long>(ns), phases.c_str());
  return 0;
}

// ---- the runner ---------------------------------------------------------------------------------

// `env`: for every devdl process (the linker, LTO).
void firstKernelInAFreshProcess(benchmark::State &state, const std::string &backend, const std::string &lib,
                                const std::string &app, const std::vector<std::string> &env = {}) {
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.end(), env.begin(), env.end());
    return more;
  };
  std::string error;
  const fs::path work = fs::temp_directory_path() / ("devdl-bench-cache-" + std::to_string(getpid()));
  fs::remove_all(work);
  fs::create_directories(work);
  const std::string cacheDir = (work / "cache").string(), binaryFile = (work / "program.bin").string();
  // One load fills the cache; the binary by hand is the one devdl stored.
  if (runChild({backend, "devdl", lib, app}, with({"DEVDL_CACHE_DIR=" + cacheDir}), &error) < 0) {
    state.SkipWithError(error.c_str());
    return;
  }
  devdl::store::DiskCache cache(cacheDir, ~uint64_t(0));
  std::vector<devdl::store::EntryFile> programs;  // the entries but the large library's summary
  for (devdl::store::EntryFile &file : llvm::cantFail(cache.list()))
    if (!file.description.starts_with("image summary of ")) programs.push_back(std::move(file));
  auto entry = programs.size() == 1 ? cache.load(programs[0].key) : std::nullopt;
  if (!entry) {
    state.SkipWithError("the first load stored no single program");
    return;
  }
  // On OpenCL the entry holds the driver's binary after devdl's header (its host variables).
  std::string_view binary = entry->binary();
  if (backend == "opencl") {
    auto stored = devdl::backend::opencl::readStoredProgram(binary);
    if (!stored) {
      state.SkipWithError(llvm::toString(stored.takeError()).c_str());
      return;
    }
    binary = stored->driverBinary;
  }
  std::ofstream(binaryFile, std::ios::binary) << binary;
  const std::vector<std::string> floor = {backend,
                                          "floor",
                                          lib,
                                          app,
                                          programs[0].path,
                                          llvm::utohexstr(programs[0].key.low),
                                          llvm::utohexstr(programs[0].key.high)};

  const std::vector<std::string> kinds = {"cold", "hit", "by_hand", "floor"};
  std::vector<std::vector<double>> times(kinds.size());
  std::map<std::string, std::vector<double>> phaseTimes;  // "hit.open_app": ns of each process
  size_t turn = 0;
  for (auto _ : state) {
    double hit = 0;
    for (size_t k = 0; k < kinds.size(); ++k) {
      const size_t kind = (turn + k) % kinds.size();  // a different one first each time
      std::map<std::string, double> phases;
      const double ns =
          kind == 0   ? runChild({backend, "devdl", lib, app}, with({"DEVDL_CACHE=0"}), &error, &phases)
          : kind == 1 ? runChild({backend, "devdl", lib, app}, with({"DEVDL_CACHE=1", "DEVDL_CACHE_DIR=" + cacheDir}),
                                 &error, &phases)
          : kind == 2 ? runChild({backend, "binary", binaryFile}, {}, &error, &phases)
                      : runChild(floor, {}, &error, &phases);
      for (const auto &[phase, value] : phases) phaseTimes[kinds[kind] + "." + phase].push_back(value);
      if (ns < 0) {
        state.SkipWithError(error.c_str());
        return;
      }
      times[kind].push_back(ns);
      if (kind == 1) hit = ns;
    }
    ++turn;
    state.SetIterationTime(hit / 1e9);
  }
  const double cold = median(times[0]), hit = median(times[1]), byHand = median(times[2]), atLeast = median(times[3]);
  state.counters["cold_ms"] = cold / 1e6;
  state.counters["hit_ms"] = hit / 1e6;
  state.counters["by_hand_ms"] = byHand / 1e6;
  state.counters["hit_over_by_hand"] = hit / byHand;
  state.counters["floor_ms"] = atLeast / 1e6;
  state.counters["floor_over_by_hand"] = atLeast / byHand;
  state.counters["cold_over_hit"] = cold / hit;
  for (const auto &[phase, values] : phaseTimes)
    state.counters[phase.ends_with("page_faults") ? phase : phase + "_us"] =
        median(values) / (phase.ends_with("page_faults") ? 1 : 1e3);
  state.SetLabel("medians of " + std::to_string(times[1].size()) + " processes each");
  fs::remove_all(work);
}

void BM_OpenClFirstKernelInAFreshProcess(benchmark::State &state) {
  firstKernelInAFreshProcess(state, "opencl", image("lib.spv"), image("app.spv"));
}
// With the optimization across images, which the SPIR path runs only when asked (issue 18): what
// it costs a cold load.
void BM_OpenClLtoFirstKernelInAFreshProcess(benchmark::State &state) {
  firstKernelInAFreshProcess(state, "opencl", image("lib.spv"), image("app.spv"), {"DEVDL_LTO=1"});
}
void cudaFirstKernelInAFreshProcess(benchmark::State &state, const std::string &lib, const std::string &app,
                                    const std::vector<std::string> &env = {}) {
  if (std::string why; !cuda::driver(&why)) {
    state.SkipWithError(why.c_str());
    return;
  }
  firstKernelInAFreshProcess(state, "cuda", image(lib), image(app), env);
}
void BM_CudaFirstKernelInAFreshProcess(benchmark::State &state) {
  cudaFirstKernelInAFreshProcess(state, "lib.cubin", "app.cubin");
}
// The same with the library of 96 more kernels (an 800 KB cubin): a program of some size,
// where the driver's load and the link weigh more than a fresh process's fixed costs.
void BM_CudaLargeLibraryFirstKernelInAFreshProcess(benchmark::State &state) {
  cudaFirstKernelInAFreshProcess(state, "lib_large.cubin", "app.cubin");
}
// The seed's program as PTX, as a release ships it for GPUs newer than its cubins: a cold load
// compiles it in the driver (whose own JIT cache is off), as PoCL compiles SPIR-V; a hit loads
// the linked cubin devdl stored, and so does the by-hand program.
void BM_CudaPtxFirstKernelInAFreshProcess(benchmark::State &state) {
  cudaFirstKernelInAFreshProcess(state, "lib.ptx", "app.ptx");
}

// Load-time LTO (issue 18): what linking costs cold and from the disk cache, -rdc cubins with the
// driver's cuLink (devdl's link without nvJitLink) against nvcc -dlto fatbins optimized together
// by nvJitLink; and the 800 KB library with and without LTO.
void BM_CudaCuLinkFirstKernelInAFreshProcess(benchmark::State &state) {
  cudaFirstKernelInAFreshProcess(state, "lib.cubin", "app.cubin", {"DEVDL_CUDA_LINKER=culink"});
}
void BM_CudaLtoFirstKernelInAFreshProcess(benchmark::State &state) {
  cudaFirstKernelInAFreshProcess(state, "lib.lto.fatbin", "app.lto.fatbin", {"DEVDL_CUDA_LINKER=nvjitlink"});
}
void BM_CudaLargeLibraryLtoFirstKernelInAFreshProcess(benchmark::State &state) {
  cudaFirstKernelInAFreshProcess(state, "lib_large.lto.fatbin", "app.lto.fatbin", {"DEVDL_CUDA_LINKER=nvjitlink"});
}
// The same on one thread (issue 41): one module, as before the link was split into parts.
void BM_CudaLargeLibraryLtoOneJobFirstKernelInAFreshProcess(benchmark::State &state) {
  cudaFirstKernelInAFreshProcess(state, "lib_large.lto.fatbin", "app.lto.fatbin",
                                 {"DEVDL_CUDA_LINKER=nvjitlink", "DEVDL_JOBS=1"});
}
void BM_CudaLargeLibraryNoLtoFirstKernelInAFreshProcess(benchmark::State &state) {
  cudaFirstKernelInAFreshProcess(state, "lib_large.lto.fatbin", "app.lto.fatbin",
                                 {"DEVDL_CUDA_LINKER=nvjitlink", "DEVDL_LTO=0"});
}
void BM_CudaLargeLibraryNoLtoOneJobFirstKernelInAFreshProcess(benchmark::State &state) {
  cudaFirstKernelInAFreshProcess(state, "lib_large.lto.fatbin", "app.lto.fatbin",
                                 {"DEVDL_CUDA_LINKER=nvjitlink", "DEVDL_LTO=0", "DEVDL_JOBS=1"});
}

// What kernels an application does not use cost its first kernel (issue 41): the seed's
// application with its library beside 1,000 small kernels, against beside one.
void BM_OpenClThousandKernelsFirstKernelInAFreshProcess(benchmark::State &state) {
  firstKernelInAFreshProcess(state, "opencl", image("lib_kernels1000.spv"), image("app.spv"));
}
// The same linked whole in this process (on a driver that links IL, the program is built in
// parts, each in a helper process, unless DEVDL_JOBS=1).
void BM_OpenClThousandKernelsOneJobFirstKernelInAFreshProcess(benchmark::State &state) {
  firstKernelInAFreshProcess(state, "opencl", image("lib_kernels1000.spv"), image("app.spv"), {"DEVDL_JOBS=1"});
}
void BM_OpenClOneKernelFirstKernelInAFreshProcess(benchmark::State &state) {
  firstKernelInAFreshProcess(state, "opencl", image("lib_kernels1.spv"), image("app.spv"));
}
void BM_CudaThousandKernelsLtoFirstKernelInAFreshProcess(benchmark::State &state) {
  cudaFirstKernelInAFreshProcess(state, "lib_kernels1000.lto.fatbin", "app.lto.fatbin", {"DEVDL_CUDA_LINKER=nvjitlink"});
}
void BM_CudaOneKernelLtoFirstKernelInAFreshProcess(benchmark::State &state) {
  cudaFirstKernelInAFreshProcess(state, "lib_kernels1.lto.fatbin", "app.lto.fatbin", {"DEVDL_CUDA_LINKER=nvjitlink"});
}

// Processes cold-starting together (issue 21): `processes` fresh processes load the seeds'
// example at once on one fresh disk cache, against one cold start alone. With the cache's build
// lock one of them builds and the others wait for its entry; with DEVDL_CACHE_WAIT=0 nobody
// waits and each builds (devdl before the lock), side by side in every iteration.
void togetherOnOneCache(benchmark::State &state, const std::string &backend, const std::string &lib,
                        const std::string &app) {
  const int processes = static_cast<int>(state.range(0));
  const fs::path work = fs::temp_directory_path() / ("devdl-bench-together-" + std::to_string(getpid()));
  auto freshCache = [&] {
    fs::remove_all(work);
    fs::create_directories(work);
    return "DEVDL_CACHE_DIR=" + (work / "cache").string();
  };
  const std::vector<std::string> args = {backend, "devdl", lib, app};
  std::vector<double> oneCpu, cpu, wall, eachCpu, eachWall;
  std::string error;
  for (auto _ : state) {
    devdl::bench::Together one, together, each;
    if (!runTogether(1, args, {freshCache()}, one, &error) ||
        !runTogether(processes, args, {freshCache()}, together, &error) ||
        !runTogether(processes, args, {freshCache(), "DEVDL_CACHE_WAIT=0"}, each, &error)) {
      state.SkipWithError(error.c_str());
      break;
    }
    oneCpu.push_back(one.cpuSeconds);
    cpu.push_back(together.cpuSeconds);
    wall.push_back(together.wallSeconds);
    eachCpu.push_back(each.cpuSeconds);
    eachWall.push_back(each.wallSeconds);
    state.SetIterationTime(together.wallSeconds);
  }
  fs::remove_all(work);
  if (cpu.empty()) return;
  state.counters["one_cold_cpu_s"] = median(oneCpu);
  state.counters["cpu_s"] = median(cpu);
  state.counters["wall_s"] = median(wall);
  state.counters["cpu_over_one_cold"] = median(cpu) / median(oneCpu);
  state.counters["each_builds_cpu_s"] = median(eachCpu);
  state.counters["each_builds_wall_s"] = median(eachWall);
  state.counters["each_builds_cpu_over_one_cold"] = median(eachCpu) / median(oneCpu);
  state.SetLabel("medians of " + std::to_string(cpu.size()) + " runs");
}

// A second machine (issue 21): a process with a fresh disk cache and the Redis store that a first
// machine filled (a real redis-server on loopback), against a cold build and a local hit, side
// by side in every iteration, in turns.
void remoteHitInAFreshProcess(benchmark::State &state, const std::string &backend, const std::string &lib,
                              const std::string &app) {
  devdl::test::RedisServer server;
  if (!server.why().empty()) {
    state.SkipWithError(server.why().c_str());
    return;
  }
  const fs::path work = fs::temp_directory_path() / ("devdl-bench-remote-" + std::to_string(getpid()));
  fs::remove_all(work);
  fs::create_directories(work);
  const std::string remote = "DEVDL_CACHE_REMOTE=" + server.url(), first = "DEVDL_CACHE_DIR=" + (work / "first").string();
  // The cluster's key, which tags the store's entries: a file only its owner reads.
  const std::string keyFile = (work / "key").string();
  std::ofstream(keyFile) << "the cluster's secret";
  fs::permissions(keyFile, fs::perms::owner_read | fs::perms::owner_write);
  const std::string key = "DEVDL_CACHE_KEY_FILE=" + keyFile;
  const std::vector<std::string> args = {backend, "devdl", lib, app};
  std::string error;
  if (runChild(args, {first, remote, key}, &error) < 0) {
    state.SkipWithError(error.c_str());
    return;
  }
  const std::vector<std::string> kinds = {"cold", "hit", "remote_hit"};
  std::vector<std::vector<double>> times(kinds.size());
  size_t turn = 0;
  for (auto _ : state) {
    double remoteHit = 0;
    for (size_t k = 0; k < kinds.size(); ++k) {
      const size_t kind = (turn + k) % kinds.size();
      const std::string fresh = "DEVDL_CACHE_DIR=" + (work / ("fresh-" + std::to_string(turn))).string();
      const double ns = runChild(args,
                                 kind == 0   ? std::vector<std::string>{"DEVDL_CACHE=0"}
                                 : kind == 1 ? std::vector<std::string>{first, remote, key}
                                             : std::vector<std::string>{fresh, remote, key},
                                 &error);
      if (ns < 0) {
        state.SkipWithError(error.c_str());
        fs::remove_all(work);
        return;
      }
      times[kind].push_back(ns);
      if (kind == 2) remoteHit = ns;
    }
    ++turn;
    state.SetIterationTime(remoteHit / 1e9);
  }
  fs::remove_all(work);
  const double cold = median(times[0]), hit = median(times[1]), remoteHit = median(times[2]);
  state.counters["cold_ms"] = cold / 1e6;
  state.counters["hit_ms"] = hit / 1e6;
  state.counters["remote_hit_ms"] = remoteHit / 1e6;
  state.counters["remote_hit_over_hit"] = remoteHit / hit;
  state.counters["cold_over_remote_hit"] = cold / remoteHit;
  state.SetLabel("medians of " + std::to_string(times[2].size()) + " processes each");
}

void BM_OpenClRemoteHitInAFreshProcess(benchmark::State &state) {
  remoteHitInAFreshProcess(state, "opencl", image("lib.spv"), image("app.spv"));
}
void BM_CudaRemoteHitInAFreshProcess(benchmark::State &state) {
  if (std::string why; !cuda::driver(&why)) {
    state.SkipWithError(why.c_str());
    return;
  }
  remoteHitInAFreshProcess(state, "cuda", image("lib.cubin"), image("app.cubin"));
}

void BM_OpenClProcessesTogetherOnOneCache(benchmark::State &state) {
  togetherOnOneCache(state, "opencl", image("lib.spv"), image("app.spv"));
}
void BM_CudaProcessesTogetherOnOneCache(benchmark::State &state) {
  if (std::string why; !cuda::driver(&why)) {
    state.SkipWithError(why.c_str());
    return;
  }
  togetherOnOneCache(state, "cuda", image("lib.cubin"), image("app.cubin"));
}

BENCHMARK(BM_OpenClFirstKernelInAFreshProcess)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(15);
BENCHMARK(BM_OpenClLtoFirstKernelInAFreshProcess)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(15);
BENCHMARK(BM_CudaFirstKernelInAFreshProcess)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(15);
BENCHMARK(BM_CudaLargeLibraryFirstKernelInAFreshProcess)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(15);
BENCHMARK(BM_CudaPtxFirstKernelInAFreshProcess)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(15);
BENCHMARK(BM_CudaCuLinkFirstKernelInAFreshProcess)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(15);
BENCHMARK(BM_CudaLtoFirstKernelInAFreshProcess)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(15);
BENCHMARK(BM_CudaLargeLibraryLtoFirstKernelInAFreshProcess)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(9);
BENCHMARK(BM_CudaLargeLibraryLtoOneJobFirstKernelInAFreshProcess)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(9);
BENCHMARK(BM_CudaLargeLibraryNoLtoFirstKernelInAFreshProcess)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(9);
BENCHMARK(BM_CudaLargeLibraryNoLtoOneJobFirstKernelInAFreshProcess)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(9);
BENCHMARK(BM_OpenClThousandKernelsFirstKernelInAFreshProcess)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_OpenClThousandKernelsOneJobFirstKernelInAFreshProcess)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_OpenClOneKernelFirstKernelInAFreshProcess)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_CudaThousandKernelsLtoFirstKernelInAFreshProcess)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(9);
BENCHMARK(BM_CudaOneKernelLtoFirstKernelInAFreshProcess)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(9);
BENCHMARK(BM_OpenClRemoteHitInAFreshProcess)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(15);
BENCHMARK(BM_CudaRemoteHitInAFreshProcess)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(15);
BENCHMARK(BM_OpenClProcessesTogetherOnOneCache)->Arg(8)->Arg(32)->UseManualTime()->Unit(benchmark::kSecond)->Iterations(3);
BENCHMARK(BM_CudaProcessesTogetherOnOneCache)->Arg(8)->Arg(32)->UseManualTime()->Unit(benchmark::kSecond)->Iterations(3);

}  // namespace

int main(int argc, char **argv) {
  if (argc > 1 && std::string_view(argv[1]) == "--child") return child(argc - 1, argv + 1);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
