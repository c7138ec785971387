// What only the CUDA backend has, end to end through the C API: images built by nvcc -rdc (and
// -dlto) in each of CUDA's formats, linked by devdl with the driver's linker (and nvJitLink), and
// run on the GPU. What every backend does (the seed example, chains, interposition, scopes, the
// disk cache across processes, ...) is the one suite of e2e/dlopen_fixture.h, which the GPU machine
// runs on CUDA too (scripts/gpu-run.sh). Without a driver (CI) the tests skip, saying so, and the
// library's own answer to "no driver" is checked instead.
#include "devdl.h"
#include "e2e/cuda_fixture.h"
#include "test_images.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <sys/wait.h>
#include <tuple>

namespace devdl::test {
namespace {

using cuda::Driver;

class Cuda : public OnCuda<> {
 protected:
  std::vector<int> run(void *kernel, unsigned n) { return cuda::runIntKernel(*cu_, context_, kernel, n); }

  static std::vector<int> times(int factor, int plus, unsigned n) {
    std::vector<int> v;
    for (unsigned i = 0; i < n; ++i) v.push_back(factor * static_cast<int>(i) + plus);
    return v;
  }

  // Opens each image `binding` (DEVDL_NOW: each linked as it is opened) | DEVDL_GLOBAL in order.
  std::vector<void *> openGlobal(std::initializer_list<const char *> names, int binding = DEVDL_NOW) {
    std::vector<void *> handles;
    for (const char *name : names) {
      void *h = device_dlopen(image(name).c_str(), binding | DEVDL_GLOBAL);
      EXPECT_NE(h, nullptr) << name << ": " << error();
      if (h) handles.push_back(h);
    }
    return handles;
  }
  static void closeAll(const std::vector<void *> &handles) {
    for (auto it = handles.rbegin(); it != handles.rend(); ++it) EXPECT_EQ(device_dlclose(*it), 0) << error();
  }

  // Opens `app` after `libs` (global, `binding`) and runs `kernel` over 8 threads.
  std::vector<int> runSeed(std::initializer_list<const char *> libs, const char *app, const char *kernel,
                           int libBinding = DEVDL_NOW) {
    auto handles = openGlobal(libs, libBinding);
    void *h = device_dlopen(image(app).c_str(), DEVDL_NOW);
    EXPECT_NE(h, nullptr) << error();
    if (!h) return closeAll(handles), std::vector<int>();
    void *k = device_dlsym(h, kernel);
    EXPECT_NE(k, nullptr) << error();
    std::vector<int> out = k ? run(k, 8) : std::vector<int>();
    device_dlclose(h);
    closeAll(handles);
    return out;
  }
};

TEST_F(Cuda, SeedExampleAsPtx) { EXPECT_EQ(runSeed({"lib.ptx"}, "app.ptx", "AppKernel"), times(2, 0, 8)); }

TEST_F(Cuda, CubinAndPtxInOnePlan) {
  EXPECT_EQ(runSeed({"lib.ptx"}, "app.cubin", "AppKernel"), times(2, 0, 8));
  EXPECT_EQ(runSeed({"lib.cubin"}, "app.ptx", "AppKernel"), times(2, 0, 8));
}

TEST_F(Cuda, SeedExampleAsLtoIr) {
  EXPECT_EQ(runSeed({"lib.lto.fatbin"}, "app.lto.fatbin", "AppKernel"), times(2, 0, 8));
}

// A program the driver's linker refuses (a call devdl leaves to it, which nothing defines) is
// refused again at each lookup with the same error, not linked again (LoaderPrograms counts links).
TEST_F(Cuda, AFailedLinkIsGivenAgain) {
  void *app = device_dlopen(image("app_missing.cubin").c_str(), DEVDL_LAZY);
  ASSERT_NE(app, nullptr) << error();
  EXPECT_EQ(device_dlsym(app, "MissingKernel"), nullptr);
  const std::string first = error();
  EXPECT_FALSE(first.empty());
  EXPECT_EQ(device_dlsym(app, "MissingKernel"), nullptr);
  EXPECT_EQ(error(), first);
  EXPECT_EQ(device_dlclose(app), 0);
}

// A kernel launching another image's kernel from the device (dynamic parallelism), with device
// printf, malloc and free: devdl links the CUDA device runtime in, as nvcc -dlink does, with the
// driver's linker and, for LTO-IR, with nvJitLink. Dynamic shared memory (an extern __shared__
// array) is the kernel's own, no import.
TEST_F(Cuda, DynamicParallelismAcrossImages) {
  for (const auto &[lib, app] : {std::pair{"toolchain_lib.cubin", "toolchain_app.cubin"},
                                 std::pair{"toolchain_lib.ptx", "toolchain_app.ptx"},
                                 std::pair{"toolchain_lib.fatbin", "toolchain_app.fatbin"},
                                 std::pair{"toolchain_lib.lto.fatbin", "toolchain_app.lto.fatbin"}})
    EXPECT_EQ(runSeed({lib}, app, "ParentKernel"), times(3, 1, 8)) << app;
  void *lib = device_dlopen(image("toolchain_lib.cubin").c_str(), DEVDL_NOW | DEVDL_GLOBAL);
  ASSERT_NE(lib, nullptr) << error();
  void *app = device_dlopen(image("toolchain_app.cubin").c_str(), DEVDL_LAZY);
  ASSERT_NE(app, nullptr) << error();
  void *scratch = device_dlsym(app, "ScratchKernel");
  ASSERT_NE(scratch, nullptr) << error();
  EXPECT_EQ(cuda::runIntKernel(*cu_, context_, scratch, 8, 8 * sizeof(int)), times(-1, 7, 8));
  EXPECT_EQ(device_dlclose(app), 0) << error();
  EXPECT_EQ(device_dlclose(lib), 0) << error();
}

TEST_F(Cuda, FatbinsGiveTheMemberForTheDevice) {
  EXPECT_EQ(runSeed({"lib.fatbin"}, "app.fatbin", "AppKernel"), times(2, 0, 8));
  // sm_80 cubin + compute_80 PTX: on a 9.x device the cubin cannot run, the PTX is compiled.
  EXPECT_EQ(runSeed({"lib_sm80.fatbin"}, "app.cubin", "AppKernel"), times(2, 0, 8));
}

TEST_F(Cuda, CubinForAnotherGenerationIsNoCandidate) {
  auto libs = openGlobal({"lib_sm80.cubin"});
  void *app = device_dlopen(image("app.cubin").c_str(), DEVDL_NOW);
  EXPECT_EQ(app, nullptr);
  const std::string message = error();
  EXPECT_NE(message.find(image("app.cubin") + ": image 0 (cubin sm_90): undefined device symbol `LibDeviceFunc` (" +
                         image("lib_sm80.cubin") + ": image 0 (cubin sm_80) defines it, but cubin for sm_80 does not run on "),
            std::string::npos)
      << message;
  closeAll(libs);
}

TEST_F(Cuda, FunctionPointerAcrossImages) {
  EXPECT_EQ(runSeed({"lib.cubin"}, "app_pointer.cubin", "PointerKernel"), times(2, 0, 8));
  // As NVIDIA's simpleSeparateCompilation keeps them: a function pointer in a device variable
  // (LibPointer). The host reads it and device_dladdr names the function; device_dlsym gives the
  // same address, from devdl's table of the program's functions (CUDA gives none).
  void *lib = device_dlopen(image("lib.cubin").c_str(), DEVDL_NOW | DEVDL_GLOBAL);
  void *app = device_dlopen(image("app_pointer.cubin").c_str(), DEVDL_NOW);
  ASSERT_TRUE(lib && app) << error();
  void *held = nullptr;
  ASSERT_EQ(device_dlread(app, "LibPointer", 0, &held, sizeof held), 0) << error();
  ASSERT_NE(held, nullptr);
  devdl_addr_info info{};
  info.size = sizeof info;
  ASSERT_NE(device_dladdr(held, &info), 0) << error();
  EXPECT_EQ(std::string(info.symbol), "LibDeviceFunc");
  EXPECT_EQ(std::string(info.file), image("lib.cubin"));
  EXPECT_EQ(info.image, 0u);
  EXPECT_EQ(info.kind, DEVDL_SYMBOL_FUNCTION);
  EXPECT_EQ(info.offset, 0u);
  EXPECT_EQ(info.symbol_address, held);
  EXPECT_EQ(device_dlsym(app, "LibDeviceFunc"), held) << error();
  // The variable that holds it, at an address inside it.
  void *variable = device_dlsym(app, "LibPointer");
  ASSERT_NE(variable, nullptr) << error();
  ASSERT_NE(device_dladdr(static_cast<char *>(variable) + 1, &info), 0) << error();
  EXPECT_EQ(std::string(info.symbol), "LibPointer");
  EXPECT_EQ(std::string(info.file), image("app_pointer.cubin"));
  EXPECT_EQ(info.kind, DEVDL_SYMBOL_VARIABLE);
  EXPECT_EQ(info.offset, 1u);
  EXPECT_EQ(device_dladdr(static_cast<char *>(held) + 4, &info), 0) << "a function is named by its start alone";
  device_dlclose(app);
  device_dlclose(lib);
}

// The kernel writes the variable, the host reads what it wrote (the suite's
// DeviceDlopen.VariablesHaveDeviceAddresses writes from the host).
TEST_F(Cuda, DeviceGlobalReadAndWrittenFromBothSides) {
  auto libs = openGlobal({"lib.cubin"});
  void *app = device_dlopen(image("app_counter.cubin").c_str(), DEVDL_NOW);
  ASSERT_NE(app, nullptr) << error();
  void *kernel = device_dlsym(app, "CounterKernel");
  ASSERT_NE(kernel, nullptr) << error();
  // The variable's instance in the program the kernel runs in.
  void *counter = device_dlsym(libs[0], "LibCounter");
  ASSERT_NE(counter, nullptr) << error();
  const auto address = static_cast<cuda::CUdeviceptr>(reinterpret_cast<uintptr_t>(counter));
  int value = 0;
  ASSERT_EQ(cu_->cuCtxPushCurrent(context_), cuda::CUDA_SUCCESS);
  EXPECT_EQ(cu_->cuMemcpyDtoH(&value, address, sizeof value), cuda::CUDA_SUCCESS);
  EXPECT_EQ(value, 7);  // its initializer in lib.cu
  value = 5;
  EXPECT_EQ(cu_->cuMemcpyHtoD(address, &value, sizeof value), cuda::CUDA_SUCCESS);
  cuda::CUcontext popped;
  cu_->cuCtxPopCurrent(&popped);
  EXPECT_EQ(run(kernel, 4), times(1, 5, 4));
  ASSERT_EQ(cu_->cuCtxPushCurrent(context_), cuda::CUDA_SUCCESS);
  EXPECT_EQ(cu_->cuMemcpyDtoH(&value, address, sizeof value), cuda::CUDA_SUCCESS);
  cu_->cuCtxPopCurrent(&popped);
  EXPECT_EQ(value, 105);  // the kernel's write
  device_dlclose(app);
  closeAll(libs);
}

TEST_F(Cuda, InterpositionIsBySymbolInEveryFormat) {
  // interpose_app takes Answer from interpose_first (first in search order) and needs
  // interpose_other for Other, which defines Answer too: the link sees that one local (the
  // driver's linker said "Multiple definition of 'Answer'").
  // LTO-IR too: nvJitLink optimizes the fatbins that interposition leaves whole, and links the
  // PTX of the one whose Answer it made local.
  for (const char *format : {"cubin", "ptx", "fatbin", "lto.fatbin"}) {
    SCOPED_TRACE(format);
    auto name = [&](const char *base) { return std::string(base) + "." + format; };
    auto libs = openGlobal({name("interpose_first").c_str(), name("interpose_other").c_str()});
    void *app = device_dlopen(image(name("interpose_app")).c_str(), DEVDL_NOW);
    ASSERT_NE(app, nullptr) << error();
    void *kernel = device_dlsym(app, "InterposeKernel");
    ASSERT_NE(kernel, nullptr) << error();
    EXPECT_EQ(run(kernel, 8), times(1, 210, 8));
    device_dlclose(app);
    closeAll(libs);
  }
}

TEST_F(Cuda, PackedIntoOneBundle) {
  // devdl-pack made it at build time: the library and the application in one file.
  void *both = device_dlopen(image("seed-cuda.devdl").c_str(), DEVDL_NOW);
  ASSERT_NE(both, nullptr) << error();
  void *kernel = device_dlsym(both, "AppKernel");
  ASSERT_NE(kernel, nullptr) << error();
  EXPECT_EQ(run(kernel, 8), times(2, 0, 8));
  device_dlclose(both);
}

TEST_F(Cuda, AttachToTheContextInUseOrSayWhy) {
  devdl_native native{};
  native.size = sizeof native;
  native.backend = DEVDL_BACKEND_CUDA;
  ASSERT_EQ(device_dlnative(&native), 0) << error();
  EXPECT_EQ(device_dlattach(&native), 0) << error();  // the device and context in use: nothing to change
  devdl_native bogus = native;
  bogus.device = reinterpret_cast<void *>(intptr_t{99});
  EXPECT_NE(device_dlattach(&bogus), 0);
  EXPECT_NE(error().find("CUDA device 99: cuDeviceGetName failed: CUDA_ERROR_INVALID_DEVICE"), std::string::npos)
      << error();
}

// What the driver's linker says of a missing symbol, by hand: the text devdl's
// describeLinkLog reads (its unit test holds a copy of this output).
TEST_F(Cuda, DriverLogOfAMissingSymbol) {
  std::string log(8192, '\0');
  cuda::CUjit_option options[] = {cuda::CU_JIT_ERROR_LOG_BUFFER, cuda::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {log.data(), reinterpret_cast<void *>(log.size())};
  ASSERT_EQ(cu_->cuCtxPushCurrent(context_), cuda::CUDA_SUCCESS);
  cuda::CUlinkState state = nullptr;
  ASSERT_EQ(cu_->cuLinkCreate(2, options, values, &state), cuda::CUDA_SUCCESS);
  std::string app = readFile(image("app.cubin"));
  EXPECT_EQ(cu_->cuLinkAddData(state, cuda::CU_JIT_INPUT_CUBIN, app.data(), app.size(), "app.cubin: image 0 (cubin)", 0,
                               nullptr, nullptr),
            cuda::CUDA_SUCCESS);
  void *cubin = nullptr;
  size_t size = 0;
  const cuda::CUresult result = cu_->cuLinkComplete(state, &cubin, &size);
  cu_->cuLinkDestroy(state);
  cuda::CUcontext popped;
  cu_->cuCtxPopCurrent(&popped);
  log.resize(std::strlen(log.c_str()));
  std::cout << "cuLinkComplete: " << result << "\nerror log:\n" << log << "\n";
  EXPECT_NE(result, cuda::CUDA_SUCCESS);
  EXPECT_NE(log.find("Undefined reference to 'LibDeviceFunc' in 'app.cubin: image 0 (cubin)'"), std::string::npos)
      << log;
}

// Run by Cuda.LtoIrLinkedByNvJitLinkAndCached in a process of its own, with a cache directory of
// its own: the seed example (DEVDL_TEST_CACHE_FORMAT) loaded through the disk cache, the
// kernel's output checked, and a device global of the cached program found.
TEST_F(Cuda, CacheChildLoadsAndRuns) {
  if (!std::getenv("DEVDL_TEST_CACHE_CHILD")) GTEST_SKIP() << "run by Cuda.LtoIrLinkedByNvJitLinkAndCached in a process of its own";
  const std::string format = std::getenv("DEVDL_TEST_CACHE_FORMAT") ? std::getenv("DEVDL_TEST_CACHE_FORMAT") : "cubin";
  void *lib = device_dlopen(image("lib." + format).c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_NE(lib, nullptr) << error();
  void *app = device_dlopen(image("app." + format).c_str(), DEVDL_NOW);  // the one load of the program
  ASSERT_NE(app, nullptr) << error();
  void *kernel = device_dlsym(app, "AppKernel");
  ASSERT_NE(kernel, nullptr) << error();
  EXPECT_EQ(run(kernel, 8), times(2, 0, 8));
  EXPECT_NE(device_dlsym(lib, "LibCounter"), nullptr) << error();
  device_dlclose(app);
  device_dlclose(lib);
}

// Runs `test` (CacheChildLoadsAndRuns, by default) in a new process with DEVDL_TEST_CACHE_CHILD
// set, the disk cache in `dir`, and `environment` (NAME=VALUE ...) for devdl; its exit status and
// what it printed.
std::pair<int, std::string> runCacheChild(const std::string &dir, const std::string &environment = "",
                                          const std::string &test = "Cuda.CacheChildLoadsAndRuns") {
  const std::string self = std::filesystem::canonical("/proc/self/exe").string();
  const std::string command = "DEVDL_TEST_CACHE_CHILD=1 DEVDL_CACHE= DEVDL_CACHE_DIR='" + dir + "' " + environment +
                              " DEVDL_DEBUG=statistics '" + self + "' --gtest_filter=" + test + " 2>&1";
  std::string out;
  FILE *pipe = popen(command.c_str(), "r");
  if (!pipe) return {-1, "popen failed"};
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST_F(Cuda, LtoIrLinkedByNvJitLinkAndCached) {
  // The seed example as nvcc -dlto fatbins: nvJitLink optimizes their LTO-IR together, the
  // statistics say so, and the disk cache keeps the linked cubin for the next process.
  if (std::getenv("DEVDL_TEST_CACHE_CHILD")) GTEST_SKIP() << "this is the child";
  char dir[] = "/tmp/devdl-cuda-lto-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string lto = "DEVDL_TEST_CACHE_FORMAT=lto.fatbin";
  auto [status, out] = runCacheChild(dir, lto + " DEVDL_CUDA_LINKER=nvjitlink");
  if (out.find("there is no libnvJitLink") != std::string::npos) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "no nvJitLink on this machine (a CUDA 12 or later toolkit installs it)";
  }
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("with nvJitLink"), std::string::npos) << out;
  EXPECT_NE(out.find("(-arch=sm_"), std::string::npos) << out;
  EXPECT_NE(out.find(" -lto), a "), std::string::npos) << out;
  EXPECT_NE(out.find("cache: 0 hits, 1 misses, 1 stored"), std::string::npos) << out;
  // Unasked, devdl links LTO-IR with nvJitLink too: the same key, so the next process loads it.
  std::tie(status, out) = runCacheChild(dir, lto);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("cache: 1 hits, 0 misses, 0 stored"), std::string::npos) << out;
  // LTO off: another key, and the driver's cuLink links the fatbins' PTX.
  std::tie(status, out) = runCacheChild(dir, lto + " DEVDL_LTO=0");
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("cache: 0 hits, 1 misses, 1 stored"), std::string::npos) << out;
  EXPECT_NE(out.find("cuLinkComplete"), std::string::npos) << out;
  EXPECT_EQ(out.find("with nvJitLink"), std::string::npos) << out;
  // Compiled code alone: cuLink, which does not pay for loading nvJitLink.
  std::tie(status, out) = runCacheChild(dir, "DEVDL_TEST_CACHE_FORMAT=cubin");
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("cuLinkComplete"), std::string::npos) << out;
  EXPECT_EQ(out.find("with nvJitLink"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

// Run by Cuda.ProgramInParts in a process of its own: the library of parts.cu linked with LTO
// (in parts where DEVDL_JOBS allows), each kernel's output checked, the variable one instance
// for its two kernels and the host, one address of the function two kernels take; then the number
// of modules the kernels are in, printed.
TEST_F(Cuda, PartsChildRunsEveryKernel) {
  if (!std::getenv("DEVDL_TEST_CACHE_CHILD")) GTEST_SKIP() << "run by Cuda.ProgramInParts in a process of its own";
  void *h = device_dlopen(image("parts.lto.fatbin").c_str(), DEVDL_NOW);
  ASSERT_NE(h, nullptr) << error();
  std::set<cuda::CUmodule> modules;
  auto kernel = [&](const char *name) {
    void *k = device_dlsym(h, name);
    EXPECT_NE(k, nullptr) << name << ": " << error();
    cuda::CUmodule module = nullptr;
    if (k && cu_->cuFuncGetModule(&module, static_cast<cuda::CUfunction>(k)) == cuda::CUDA_SUCCESS)
      modules.insert(module);
    return k;
  };
  auto mix = [](int factor) {
    std::vector<int> v;
    for (int i = 0; i < 8; ++i) v.push_back(factor * (i * i + 1));
    return v;
  };
  void *square = kernel("Square"), *negate = kernel("Negate"), *negateTwice = kernel("NegateTwice");
  void *bump = kernel("BumpShared"), *read = kernel("ReadShared");
  void *twiceAddress = kernel("TwiceAddress"), *addressOfTwice = kernel("AddressOfTwice");
  ASSERT_FALSE(HasFailure());
  std::vector<int> squares;
  for (int i = 0; i < 8; ++i) squares.push_back(i * i);
  EXPECT_EQ(run(square, 8), squares);
  EXPECT_EQ(run(negate, 8), mix(-1));
  EXPECT_EQ(run(negateTwice, 8), mix(-2));
  // Shared: its initializer, a kernel's write seen by the other kernel and the host, the host's
  // write seen by the kernel.
  int shared = 0;
  ASSERT_EQ(device_dlread(h, "Shared", 0, &shared, sizeof shared), 0) << error();
  EXPECT_EQ(shared, 3);
  EXPECT_EQ(run(read, 8), times(1, 3, 8));
  EXPECT_EQ(run(bump, 8), mix(1));
  EXPECT_EQ(run(read, 8), times(1, 103, 8));
  ASSERT_EQ(device_dlread(h, "Shared", 0, &shared, sizeof shared), 0) << error();
  EXPECT_EQ(shared, 103);
  shared = 7;
  ASSERT_EQ(device_dlwrite(h, "Shared", 0, &shared, sizeof shared), 0) << error();
  EXPECT_EQ(run(read, 8), times(1, 7, 8));
  // Twice called through its address in both kernels, and the address the same.
  const std::vector<int> first = run(twiceAddress, 8), second = run(addressOfTwice, 8);
  ASSERT_EQ(first.size(), 8u);
  EXPECT_EQ(first, second);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(first[i] % 1000, 2 * i);
  std::printf("modules: %zu\n", modules.size());
  device_dlclose(h);
}

TEST_F(Cuda, ProgramInParts) {
  // Linked in parts on four threads, stored in the disk cache and loaded from it by the next
  // process; on one thread, one module: the same outputs every time.
  if (std::getenv("DEVDL_TEST_CACHE_CHILD")) GTEST_SKIP() << "this is the child";
  char dir[] = "/tmp/devdl-cuda-parts-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string test = "Cuda.PartsChildRunsEveryKernel";
  auto [status, out] = runCacheChild(dir, "DEVDL_JOBS=4", test);
  if (out.find("with nvJitLink") == std::string::npos) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "no nvJitLink on this machine (a CUDA 12 or later toolkit installs it): " << out;
  }
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("as 4 modules on as many threads"), std::string::npos) << out;
  EXPECT_NE(out.find("modules: 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("cache: 0 hits, 1 misses, 1 stored"), std::string::npos) << out;
  std::tie(status, out) = runCacheChild(dir, "DEVDL_JOBS=4", test);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("cache: 1 hits, 0 misses, 0 stored"), std::string::npos) << out;
  EXPECT_NE(out.find("loaded a program of 4 modules"), std::string::npos) << out;
  EXPECT_NE(out.find("modules: 4\n"), std::string::npos) << out;
  std::tie(status, out) = runCacheChild(dir, "DEVDL_JOBS=1 DEVDL_CACHE=0", test);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("one module: DEVDL_JOBS=1"), std::string::npos) << out;
  EXPECT_NE(out.find("modules: 1\n"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

// Run by Cuda.LargeProgramsCompileOnEveryThread in a process of its own: the seed's application
// with the library of 96 more kernels, from its -dlto fatbins, the library opened lazily so that
// the application's open is the one link.
TEST_F(Cuda, LargeChildRunsTheSeed) {
  if (!std::getenv("DEVDL_TEST_CACHE_CHILD")) GTEST_SKIP() << "run by Cuda.LargeProgramsCompileOnEveryThread";
  EXPECT_EQ(runSeed({"lib_large.lto.fatbin"}, "app.lto.fatbin", "AppKernel", DEVDL_LAZY), times(2, 0, 8));
}

TEST_F(Cuda, LargeProgramsCompileOnEveryThread) {
  // The 96-kernel library with LTO: in parts. From its PTX (DEVDL_LTO=0), 1 MB: by nvJitLink,
  // whose ptxas compiles on every thread. On one thread: one module, and the driver's cuLink for
  // PTX, as before DEVDL_JOBS.
  if (std::getenv("DEVDL_TEST_CACHE_CHILD")) GTEST_SKIP() << "this is the child";
  const std::string test = "Cuda.LargeChildRunsTheSeed";
  auto [status, out] = runCacheChild("/nonexistent", "DEVDL_CACHE=0 DEVDL_JOBS=4", test);
  if (out.find("with nvJitLink") == std::string::npos)
    GTEST_SKIP() << "no nvJitLink on this machine (a CUDA 12 or later toolkit installs it): " << out;
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("as 4 modules on as many threads"), std::string::npos) << out;
  std::tie(status, out) = runCacheChild("/nonexistent", "DEVDL_CACHE=0 DEVDL_JOBS=4 DEVDL_LTO=0", test);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("(-arch=sm_90), a "), std::string::npos) << out;
  std::tie(status, out) = runCacheChild("/nonexistent", "DEVDL_CACHE=0 DEVDL_JOBS=1 DEVDL_LTO=0", test);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("cuLinkComplete"), std::string::npos) << out;
  EXPECT_EQ(out.find("with nvJitLink"), std::string::npos) << out;
  std::tie(status, out) = runCacheChild("/nonexistent", "DEVDL_CACHE=0 DEVDL_JOBS=1", test);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("one module: DEVDL_JOBS=1"), std::string::npos) << out;
}

// Where there is no driver, the library loads, and says so when CUDA is needed.
TEST(CudaWithoutDriver, SaysSoCleanly) {
  std::string why;
  if (cuda::driver(&why)) GTEST_SKIP() << "a CUDA driver is here: the tests above use it";
  devdl_native native{};
  native.size = sizeof native;
  native.backend = DEVDL_BACKEND_CUDA;
  EXPECT_NE(device_dlnative(&native), 0);
  const std::string message = error();
  EXPECT_NE(message.find("no CUDA driver: cannot load libcuda.so.1"), std::string::npos) << message;
  EXPECT_NE(device_dlattach(&native), 0);
  EXPECT_NE(error().find("no CUDA driver: cannot load libcuda.so.1"), std::string::npos) << error();
  if (!DEVDL_TEST_CUDA_IMAGES) return;
  void *lib = device_dlopen(image("lib.cubin").c_str(), DEVDL_LAZY);
  ASSERT_NE(lib, nullptr) << error();
  EXPECT_EQ(device_dlsym(lib, "LibDeviceFunc"), nullptr);
  EXPECT_NE(error().find("which cannot be linked here: no CUDA driver: cannot load libcuda.so.1"), std::string::npos)
      << error();
  device_dlclose(lib);
}

}  // namespace
}  // namespace devdl::test
