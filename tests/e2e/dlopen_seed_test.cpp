// The end-to-end suite (e2e/dlopen_fixture.h) from the start: the seed example, an application
// with the library it needs, threads whose first
// calls coincide, errors and lazy links, the images listed, the device chosen by the environment
// or attached to the program's own context, and how a program was linked.
#include "e2e/dlopen_fixture.h"

#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

namespace devdl::test {
namespace {

TEST_F(DeviceDlopen, SeedExampleLinksAcrossHandlesAndRuns) {
  void *lib = device_dlopen(deviceImage("lib").c_str(), DEVDL_NOW | DEVDL_GLOBAL);
  ASSERT_NE(lib, nullptr) << error();
  void *app = device_dlopen(deviceImage("app").c_str(), DEVDL_NOW);
  ASSERT_NE(app, nullptr) << error();
  void *kernel = device_dlsym(app, "AppKernel");
  ASSERT_NE(kernel, nullptr) << error();
  EXPECT_EQ(device_dlsym(app, "AppKernel"), kernel) << "the same kernel object for the same name";
  const std::vector<int> out = run(kernel, 8);
  EXPECT_EQ(out, (std::vector<int>{0, 2, 4, 6, 8, 10, 12, 14}));
  EXPECT_EQ(device_dlclose(app), 0) << error();
  EXPECT_EQ(device_dlclose(lib), 0) << error();
}

// An application that ships its library in its own tree (as devdl-pack --needed mathlib.devdl
// --runpath '$ORIGIN/deps' packs it): one device_dlopen of the application, from another current directory, loads
// the library with it, and its kernel runs; closing it unloads both.
TEST_F(DeviceDlopen, AnApplicationLoadsTheLibraryItNeedsThroughItsRunPath) {
  const std::string dir = scratchDir();
  std::filesystem::create_directories(dir + "/pkg/deps");
  std::filesystem::create_directories(dir + "/elsewhere");
  writeNeedingBundle(dir + "/pkg/deps/mathlib.devdl", deviceImage("lib"), "");
  writeNeedingBundle(dir + "/pkg/app.devdl", deviceImage("app"), "mathlib.devdl", "$ORIGIN/deps");
  const std::filesystem::path before = std::filesystem::current_path();
  std::filesystem::current_path(dir + "/elsewhere");
  void *app = device_dlopen("../pkg/app.devdl", DEVDL_NOW);
  std::filesystem::current_path(before);
  ASSERT_NE(app, nullptr) << error();
  EXPECT_EQ(run(device_dlsym(app, "AppKernel"), 4), (std::vector<int>{0, 2, 4, 6}));
  devdl_symbol_info info{};
  info.size = sizeof info;
  ASSERT_EQ(device_dlsyminfo(app, "LibDeviceFunc", &info), 0) << error();
  EXPECT_EQ(std::string(info.file), "../pkg/deps/mathlib.devdl");
  EXPECT_EQ(device_dlclose(app), 0) << error();
  EXPECT_TRUE(llvm::none_of(loadedImageFiles(), [](const std::string &file) { return file.find("/pkg/") != std::string::npos; }))
      << "both closed";
  // Without its library the open fails, naming the file that needs it and where it was sought.
  std::filesystem::remove(dir + "/pkg/deps/mathlib.devdl");
  EXPECT_EQ(device_dlopen((dir + "/pkg/app.devdl").c_str(), DEVDL_NOW), nullptr);
  EXPECT_EQ(error().rfind(dir + "/pkg/app.devdl needs mathlib.devdl: not found in $ORIGIN/deps (" + dir + "/pkg/deps), ",
                          0),
            0u)
      << error();
}

// Needed files in a chain (top needs mid needs base) and a diamond (top needs left and right,
// which both need base): each loaded once, and the kernels compute through them.
TEST_F(DeviceDlopen, NeededFilesInAChainAndADiamondAreLoadedOnceEach) {
  const std::string dir = scratchDir();
  auto pack = [&](const std::string &name, const std::string &needed) {
    writeNeedingBundle(dir + "/" + name + ".devdl", deviceImage(name), needed, "$ORIGIN");
  };
  pack("chain_top", "chain_mid.devdl");
  pack("chain_mid", "chain_base.devdl");
  pack("chain_base", "");
  pack("diamond_top", "diamond_left.devdl,diamond_right.devdl");
  pack("diamond_left", "diamond_base.devdl");
  pack("diamond_right", "diamond_base.devdl");
  pack("diamond_base", "");
  void *chain = device_dlopen((dir + "/chain_top.devdl").c_str(), DEVDL_NOW);
  ASSERT_NE(chain, nullptr) << error();
  EXPECT_EQ(run(device_dlsym(chain, "ChainKernel"), 4), (std::vector<int>{7, 9, 11, 13}));
  void *diamond = device_dlopen((dir + "/diamond_top.devdl").c_str(), DEVDL_NOW);
  ASSERT_NE(diamond, nullptr) << error();
  EXPECT_EQ(run(device_dlsym(diamond, "DiamondKernel"), 4), (std::vector<int>{3, 23, 43, 63}));
  std::vector<std::string> expected;
  for (const char *name : {"chain_top", "chain_mid", "chain_base", "diamond_top", "diamond_left", "diamond_right",
                           "diamond_base"})
    expected.push_back(dir + "/" + name + ".devdl");
  std::vector<std::string> loaded = loadedImageFiles();
  llvm::erase_if(loaded, [&](const std::string &file) { return file.rfind(dir, 0) != 0; });
  llvm::sort(loaded);
  llvm::sort(expected);
  EXPECT_EQ(loaded, expected) << "one image each";
  EXPECT_EQ(device_dlclose(chain), 0) << error();
  EXPECT_EQ(device_dlclose(diamond), 0) << error();
  loaded = loadedImageFiles();
  EXPECT_TRUE(llvm::none_of(loaded, [&](const std::string &file) { return file.rfind(dir, 0) == 0; }));
}

// A thread pool whose workers load their kernels as they start: eight threads whose first devdl
// calls coincide, in new processes. The backend's device is opened once and the others wait for
// it (each opening one, PoCL crashed or found no device with a compiler, in every process).
TEST_F(DeviceDlopen, ThreadsStartingTogetherOpenTheDeviceOnce) {
  // The probe where the GPU machine's stage has it (scripts/gpu-run.sh), else where it was built.
  const char *moved = std::getenv("DEVDL_TEST_FIRST_USE_PROBE");
  const std::vector<std::string> probe = {moved ? moved : DEVDL_TEST_FIRST_USE_PROBE, deviceImage("lib"),
                                          deviceImage("app"), "AppKernel"};
  for (int process = 0; process < 6; ++process) {
    CommandResult started = devdl::test::run(probe);
    EXPECT_EQ(started.status, 0) << started.out << started.err;
    // CUDA's CUfunction is shared; OpenCL's and Level Zero's kernel objects hold their arguments,
    // and each thread gets its own.
    EXPECT_EQ(started.out, backend_ == DEVDL_BACKEND_CUDA ? "8 of 8 found AppKernel (one object)\n"
                                                          : "8 of 8 found AppKernel (an object each)\n")
        << started.err;
  }
  // A device that does not open: every thread is told why, the same.
  setenv("DEVDL_DEVICE", "99", 1);
  CommandResult failed = devdl::test::run(probe);
  unsetenv("DEVDL_DEVICE");
  EXPECT_EQ(failed.status, 1) << failed.err;
  std::vector<std::string> lines = linesOf(failed.out);
  ASSERT_EQ(lines.size(), 9u) << failed.out;
  EXPECT_NE(lines[0].find("DEVDL_DEVICE=99: there are "), std::string::npos) << lines[0];
  for (int thread = 1; thread < 8; ++thread) EXPECT_EQ(lines[thread], lines[0]);
  EXPECT_EQ(lines[8], "0 of 8 found AppKernel (no object)");
}

TEST_F(DeviceDlopen, LazyFailsAtTheFirstSymbolThatNeedsTheLink) {
  void *app = device_dlopen(deviceImage("app").c_str(), DEVDL_LAZY);
  ASSERT_NE(app, nullptr) << error();
  EXPECT_EQ(device_dlsym(app, "AppKernel"), nullptr);
  EXPECT_NE(error().find("undefined device symbol `LibDeviceFunc`"), std::string::npos);
  // Once the library is in the global scope, the same handle links.
  void *lib = device_dlopen(deviceImage("lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_NE(lib, nullptr) << error();
  void *kernel = device_dlsym(app, "AppKernel");
  ASSERT_NE(kernel, nullptr) << error();
  EXPECT_EQ(run(kernel, 4), (std::vector<int>{0, 2, 4, 6}));
  device_dlclose(app);
  device_dlclose(lib);
}

TEST_F(DeviceDlopen, ErrorsAreClearAndPerThread) {
  EXPECT_EQ(device_dlopen("/nonexistent/lib.spv", DEVDL_NOW), nullptr);
  std::string other = "unset";
  std::thread([&] {
    const char *e = device_dlerror();
    other = e ? e : "";
  }).join();
  EXPECT_EQ(other, "") << "another thread sees no error";
  EXPECT_EQ(error(), "/nonexistent/lib.spv: No such file or directory");
  EXPECT_EQ(device_dlerror(), nullptr) << "cleared on read";

  EXPECT_EQ(device_dlopen(deviceImage("lib").c_str(), 0), nullptr);
  EXPECT_EQ(error(), "device_dlopen: flags must include DEVDL_LAZY or DEVDL_NOW");
  void *lib = device_dlopen(deviceImage("lib").c_str(), DEVDL_LAZY);
  EXPECT_EQ(device_dlsym(lib, "NoSuchSymbol"), nullptr);
  EXPECT_EQ(error(), deviceImage("lib") + ": undefined device symbol `NoSuchSymbol`");
  if (!onOpenCl() || usmMemcpy_) {
    EXPECT_NE(device_dlsym(lib, "LibCounter"), nullptr) << "a variable's device address: " << error();
  } else if (devdlPlacesVariables()) {
    const auto *counter = static_cast<const int *>(device_dlsym(lib, "LibCounter"));
    ASSERT_NE(counter, nullptr) << "the variable's place in host memory: " << error();
    EXPECT_EQ(*counter, 7) << "its initial value, where the host reads it";
  } else {
    EXPECT_EQ(device_dlsym(lib, "LibCounter"), nullptr);
    const std::string variable = error();
    EXPECT_NE(variable.find("`LibCounter` is a device variable"), std::string::npos) << variable;
  }
  device_dlclose(lib);
}

TEST_F(DeviceDlopen, IterateImagesInSearchOrder) {
  void *app = device_dlopen(deviceImage("app").c_str(), DEVDL_LAZY);
  void *lib = device_dlopen(deviceImage("lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_TRUE(app && lib) << error();
  std::vector<std::string> seen;
  EXPECT_EQ(device_dliterate(collectImages, &seen), 0);
  const char *libSymbols = backend_ == DEVDL_BACKEND_CUDA ? " 2" : " 3";  // lib.cl has LibScale too
  EXPECT_EQ(seen, (std::vector<std::string>{"lib" + extension_ + " global " + format_ + libSymbols,
                                            "app" + extension_ + " local " + format_ + " 2"}));
  int calls = 0;
  EXPECT_EQ(device_dliterate([](const devdl_image_info *, void *n) { return ++*static_cast<int *>(n) == 1 ? 7 : 0; },
                             &calls),
            7);
  EXPECT_EQ(calls, 1) << "stops at the first non-zero return";
  device_dlclose(lib);
  device_dlclose(app);
}

TEST_F(DeviceDlopen, AttachToTheProgramsOwnContext) {
  DEVDL_ONLY_ON_OPENCL(
      "an OpenCL context to attach to (LevelZero.AttachToTheProgramsOwnContext, Cuda.AttachToTheContextInUseOrSayWhy)");
  auto api = backend::opencl::api();
  ASSERT_TRUE(!!api);
  const auto &cl = *api;
  cl_int err = CL_SUCCESS;
  cl_context own = cl.clCreateContext(nullptr, 1, &device_, nullptr, nullptr, &err);
  ASSERT_EQ(err, CL_SUCCESS);
  devdl_native native{};
  native.size = sizeof native;
  native.backend = DEVDL_BACKEND_OPENCL;
  native.device = device_;
  native.context = own;
  ASSERT_EQ(device_dlattach(&native), 0) << error();
  void *lib = device_dlopen(deviceImage("lib").c_str(), DEVDL_NOW | DEVDL_GLOBAL);
  void *app = device_dlopen(deviceImage("app").c_str(), DEVDL_NOW);
  ASSERT_TRUE(lib && app) << error();
  auto kernel = static_cast<cl_kernel>(device_dlsym(app, "AppKernel"));
  ASSERT_NE(kernel, nullptr) << error();
  cl_context kernelContext = nullptr;
  ASSERT_EQ(cl.clGetKernelInfo(kernel, CL_KERNEL_CONTEXT, sizeof kernelContext, &kernelContext, nullptr), CL_SUCCESS);
  EXPECT_EQ(kernelContext, own);
  EXPECT_EQ(runIntKernel(own, device_, kernel, 2), (std::vector<int>{0, 2}));
  // Programs exist now: another context is refused.
  cl_context other = cl.clCreateContext(nullptr, 1, &device_, nullptr, nullptr, &err);
  native.context = other;
  EXPECT_NE(device_dlattach(&native), 0);
  EXPECT_NE(error().find("programs are already linked"), std::string::npos);
  device_dlclose(app);
  device_dlclose(lib);
  cl.clReleaseContext(other);
  cl.clReleaseContext(own);
}

TEST_F(DeviceDlopen, BackendAndDeviceFromTheEnvironment) {
  DEVDL_ONLY_ON_OPENCL("devdl_value_probe launches through OpenCL");
  auto probe = [this](const char *variable, const char *value) {
    setenv(variable, value, 1);
    CommandResult r = devdl::test::run({DEVDL_TEST_VALUE_PROBE, deviceImage("value_user")});
    unsetenv(variable);
    return r;
  };
  CommandResult first = probe("DEVDL_DEVICE", "0");
  EXPECT_EQ(first.status, 0) << first.err;
  EXPECT_EQ(first.out, "DupValue 1\n");
  CommandResult missing = probe("DEVDL_DEVICE", "99");
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("DEVDL_DEVICE=99: there are "), std::string::npos) << missing.err;
  CommandResult unnamed = probe("DEVDL_DEVICE", "no-such-device-name");
  EXPECT_NE(unnamed.err.find("DEVDL_DEVICE=no-such-device-name: no OpenCL device has that name"), std::string::npos)
      << unnamed.err;
  CommandResult unknown = probe("DEVDL_BACKEND", "vulkan");
  EXPECT_EQ(unknown.status, 1);
  EXPECT_NE(unknown.err.find("DEVDL_BACKEND=vulkan: no such backend (opencl, cuda and level_zero are)"),
            std::string::npos)
      << unknown.err;
  // device_dlnative (which devdl_cache_probe calls first) says the same.
  setenv("DEVDL_BACKEND", "vulkan", 1);
  CommandResult native = devdl::test::run({DEVDL_TEST_CACHE_PROBE, "1", "AppKernel", deviceImage("app")});
  unsetenv("DEVDL_BACKEND");
  EXPECT_EQ(native.status, 1);
  EXPECT_EQ(native.err, "DEVDL_BACKEND=vulkan: no such backend (opencl, cuda and level_zero are)\n");
  // SPIR-V is linked by OpenCL, which the variable turned off.
  CommandResult cuda = probe("DEVDL_BACKEND", "cuda");
  EXPECT_EQ(cuda.status, 1);
  EXPECT_NE(cuda.err.find("the opencl backend is not used: DEVDL_BACKEND=cuda"), std::string::npos) << cuda.err;
}

// DEVDL_DEBUG=statistics says which way a program was linked: where the device takes SPIR-V IL and
// has a linker (Intel's runtime), each image compiled and the objects linked by the driver, each
// call timed; elsewhere devdl's own link, and no clLinkProgram.
TEST_F(DeviceDlopen, StatisticsSayWhichWayAProgramWasLinked) {
  DEVDL_ONLY_ON_OPENCL("devdl_cache_probe launches through OpenCL");
  const auto &cl = *backend::opencl::api();
  char il[256] = {};
  cl_bool linker = CL_FALSE;
  cl.clGetDeviceInfo(device_, CL_DEVICE_IL_VERSION, sizeof il - 1, il, nullptr);
  cl.clGetDeviceInfo(device_, CL_DEVICE_LINKER_AVAILABLE, sizeof linker, &linker, nullptr);
  const bool driverLinks = std::string_view(il).find("SPIR-V") != std::string_view::npos && linker;
  if (kIntelOpenCl) {
    EXPECT_TRUE(driverLinks) << "Intel's runtime takes IL and links";
  }
  setenv("DEVDL_DEBUG", "statistics", 1);
  CommandResult traced = devdl::test::run({DEVDL_TEST_CACHE_PROBE, "1", "AppKernel", deviceImage("lib"), deviceImage("app")});
  unsetenv("DEVDL_DEBUG");
  EXPECT_EQ(traced.out, "0 2 4 6 8 10 12 14\n") << traced.err;
  std::string calls;
  for (const std::string &line : linesOf(traced.err))
    if (line.starts_with("devdl: linked ") && line.find(" on " + deviceName_ + ": ") != std::string::npos) calls = line;
  if (driverLinks) {
    EXPECT_NE(calls.find(": clCompileProgram "), std::string::npos) << traced.err;
    EXPECT_NE(calls.find(", clLinkProgram "), std::string::npos) << traced.err;
  } else {
    EXPECT_EQ(traced.err.find("clLinkProgram "), std::string::npos) << traced.err;
  }
}

}  // namespace
}  // namespace devdl::test
