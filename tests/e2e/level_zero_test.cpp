// devdl on Level Zero, through the real loader and the test driver (tests/level_zero_driver), for
// what the shared suite (e2e/dlopen_fixture.h, run on Level Zero as LevelZero.* and
// LevelZeroDynamicLink.*) does not cover: the program's own context, native Intel binaries, and
// the driver's refusals said in devdl's words.
#include "devdl.h"
#include "e2e/level_zero_run.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace devdl::test {
namespace {

const bool kLevelZero = [] {
  return setenv("ZE_ENABLE_ALT_DRIVERS", DEVDL_TEST_ZE_DRIVER, 1) == 0 && setenv("DEVDL_BACKEND", "level_zero", 1) == 0;
}();

const std::vector<int> kSeed = {0, 2, 4, 6, 8, 10, 12, 14};

TEST(LevelZero, AttachToTheProgramsOwnContext) {
  ASSERT_TRUE(kLevelZero);
  ASSERT_EQ(zeInit(0), ZE_RESULT_SUCCESS);
  uint32_t count = 1;
  ze_driver_handle_t driver = nullptr;
  ze_device_handle_t device = nullptr;
  ASSERT_EQ(zeDriverGet(&count, &driver), ZE_RESULT_SUCCESS);
  ASSERT_EQ(zeDeviceGet(driver, &count, &device), ZE_RESULT_SUCCESS);
  ze_context_desc_t desc = {ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
  ze_context_handle_t own = nullptr;
  ASSERT_EQ(zeContextCreate(driver, &desc, &own), ZE_RESULT_SUCCESS);
  devdl_native native{};
  native.size = sizeof native;
  native.backend = DEVDL_BACKEND_LEVEL_ZERO;
  native.platform = driver;
  native.device = device;
  native.context = own;
  ASSERT_EQ(device_dlattach(&native), 0) << error();
  devdl_native used{};
  used.size = sizeof used;
  ASSERT_EQ(device_dlnative(&used), 0) << error();
  EXPECT_EQ(used.backend, DEVDL_BACKEND_LEVEL_ZERO);
  EXPECT_EQ(used.platform, driver);
  EXPECT_EQ(used.device, device);
  EXPECT_EQ(used.context, own);
  void *lib = device_dlopen(image("lib.spv").c_str(), DEVDL_NOW | DEVDL_GLOBAL);
  void *app = device_dlopen(image("app.spv").c_str(), DEVDL_NOW);
  ASSERT_TRUE(lib && app) << error();
  void *kernel = device_dlsym(app, "AppKernel");
  ASSERT_NE(kernel, nullptr) << error();
  EXPECT_EQ(runIntKernel(own, device, static_cast<ze_kernel_handle_t>(kernel), 8), kSeed);
  // Programs exist now: another context is refused.
  ze_context_handle_t other = nullptr;
  ASSERT_EQ(zeContextCreate(driver, &desc, &other), ZE_RESULT_SUCCESS);
  native.context = other;
  EXPECT_NE(device_dlattach(&native), 0);
  EXPECT_NE(error().find("programs are already linked"), std::string::npos);
  device_dlclose(app);
  device_dlclose(lib);
  zeContextDestroy(other);
}

// A view of a handle in a context of the program's own (device_dlview): a module of its own there,
// with its own kernels and variables; the default context's stay as they were.
TEST(LevelZero, AViewInTheProgramsOwnContextHasItsOwnModule) {
  ASSERT_TRUE(kLevelZero);
  devdl_native used{};
  used.size = sizeof used;
  used.backend = DEVDL_BACKEND_LEVEL_ZERO;
  ASSERT_EQ(device_dlnative(&used), 0) << error();
  auto driver = static_cast<ze_driver_handle_t>(used.platform);
  auto device = static_cast<ze_device_handle_t>(used.device);
  ze_context_desc_t desc = {ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
  ze_context_handle_t own = nullptr;
  ASSERT_EQ(zeContextCreate(driver, &desc, &own), ZE_RESULT_SUCCESS);
  void *lib = device_dlopen(image("lib.spv").c_str(), DEVDL_NOW | DEVDL_GLOBAL);
  void *app = device_dlopen(image("app.spv").c_str(), DEVDL_NOW);
  ASSERT_TRUE(lib && app) << error();
  const devdl_native mine{sizeof mine, DEVDL_BACKEND_LEVEL_ZERO, driver, device, own};
  void *view = device_dlview(app, &mine);
  ASSERT_NE(view, nullptr) << error();
  void *ours = device_dlsym(view, "AppKernel");
  void *devdls = device_dlsym(app, "AppKernel");
  ASSERT_TRUE(ours && devdls) << error();
  EXPECT_NE(ours, devdls);
  EXPECT_EQ(runIntKernel(own, device, static_cast<ze_kernel_handle_t>(ours), 8), kSeed);
  EXPECT_EQ(runIntKernel(static_cast<ze_context_handle_t>(used.context), device,
                         static_cast<ze_kernel_handle_t>(devdls), 8),
            kSeed);
  const int five = 5;
  int inView = 0, inHandle = 0;
  ASSERT_EQ(device_dlwrite(view, "LibCounter", 0, &five, sizeof five), 0) << error();
  ASSERT_EQ(device_dlread(view, "LibCounter", 0, &inView, sizeof inView), 0) << error();
  ASSERT_EQ(device_dlread(app, "LibCounter", 0, &inHandle, sizeof inHandle), 0) << error();
  EXPECT_EQ(inView, 5);
  EXPECT_EQ(inHandle, 7) << "the default context's module keeps its own";
  EXPECT_EQ(device_dlclose(app), 0);
  EXPECT_EQ(device_dlclose(lib), 0);
  zeContextDestroy(own);
}

// A device handle its driver does not list (the loader would call through it) is refused, not
// taken.
TEST(LevelZero, AViewOnADeviceItsDriverDoesNotListIsAnError) {
  ASSERT_TRUE(kLevelZero);
  devdl_native used{};
  used.size = sizeof used;
  used.backend = DEVDL_BACKEND_LEVEL_ZERO;
  ASSERT_EQ(device_dlnative(&used), 0) << error();
  void *lib = device_dlopen(image("lib.spv").c_str(), DEVDL_LAZY);
  ASSERT_NE(lib, nullptr) << error();
  uintptr_t garbage[8] = {};
  const devdl_native bogus{sizeof bogus, DEVDL_BACKEND_LEVEL_ZERO, used.platform, garbage, nullptr};
  EXPECT_EQ(device_dlview(lib, &bogus), nullptr);
  EXPECT_NE(error().find("is no device its ze_driver_handle_t lists"), std::string::npos) << error();
  EXPECT_EQ(device_dlclose(lib), 0);
}

// A function's pointer is asked of the driver (zeModuleGetFunctionPointer) as a variable's address
// is (DeviceDlopen.VariablesHaveDeviceAddresses); the test driver has none to give, and devdl
// says so.
TEST(LevelZero, FunctionPointersAreAskedOfTheDriver) {
  ASSERT_TRUE(kLevelZero);
  void *lib = device_dlopen(image("lib.spv").c_str(), DEVDL_NOW | DEVDL_GLOBAL);
  ASSERT_NE(lib, nullptr) << error();
  EXPECT_EQ(device_dlsym(lib, "LibDeviceFunc"), nullptr);
  const std::string refused = error();  // cleared on read
  EXPECT_NE(refused.find("`LibDeviceFunc` is a device function: zeModuleGetFunctionPointer on devdl test driver"),
            std::string::npos)
      << refused;
  device_dlclose(lib);
}

// Intel native binaries from ocloc: one built for the device's GPU is linked as a native module
// with the application's SPIR-V (a module each, as the module program takes SPIR-V alone); one
// built for another GPU is no candidate, and the error says why.
TEST(LevelZero, NativeBinariesForTheDevicesGpu) {
  ASSERT_TRUE(kLevelZero);
  DEVDL_REQUIRE_INTEL_IMAGES();
  void *other = device_dlopen(image("lib.dg2.bin").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_NE(other, nullptr) << error();
  EXPECT_EQ(device_dlopen(image("app.spv").c_str(), DEVDL_NOW), nullptr);
  const std::string refused = error();
  EXPECT_NE(refused.find(image("app.spv") + ": image 0 (spirv): undefined device symbol `LibDeviceFunc` (" +
                         image("lib.dg2.bin") + ": image 0 (intel-native xe_hpg) defines it, but Level Zero device "),
            std::string::npos)
      << refused;
  EXPECT_NE(refused.find("does not take this native binary"), std::string::npos) << refused;
  EXPECT_NE(refused.find("ZE_RESULT_ERROR_INVALID_NATIVE_BINARY"), std::string::npos) << refused;
  device_dlclose(other);

  void *lib = device_dlopen(image("lib.gen12lp.bin").c_str(), DEVDL_NOW | DEVDL_GLOBAL);
  void *app = device_dlopen(image("app.spv").c_str(), DEVDL_NOW);
  ASSERT_TRUE(lib && app) << error();
  ze_context_handle_t context = nullptr;
  ze_device_handle_t device = nullptr;
  ASSERT_TRUE(devdlLevelZeroDevice(context, device)) << error();
  EXPECT_EQ(runIntKernel(context, device, static_cast<ze_kernel_handle_t>(device_dlsym(app, "AppKernel")), 8), kSeed);
  device_dlclose(app);
  device_dlclose(lib);
}

// A link the driver refuses is said in devdl's words: which import the defining image's module
// does not export as the driver built it (zeModuleInspectLinkageExt); here a native library
// ocloc built without -library-compilation, which exports nothing.
TEST(LevelZero, ALinkTheDriverRefusesNamesTheImportAndBothImages) {
  ASSERT_TRUE(kLevelZero);
  DEVDL_REQUIRE_INTEL_IMAGES();
  void *lib = device_dlopen(image("lib.nolibrary.bin").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_NE(lib, nullptr) << error();
  EXPECT_EQ(device_dlopen(image("app.spv").c_str(), DEVDL_NOW), nullptr);
  const std::string refused = error();
  EXPECT_NE(refused.find("zeModuleDynamicLink on "), std::string::npos) << refused;
  EXPECT_NE(refused.find("`LibDeviceFunc` imported by " + image("app.spv") + ": image 0 (spirv) is not exported by " +
                         image("lib.nolibrary.bin") + ": image 0 (intel-native gen12lp) as the driver built it (a "
                         "native binary exports only what ocloc built with -library-compilation)"),
            std::string::npos)
      << refused;
  device_dlclose(lib);
}

}  // namespace
}  // namespace devdl::test
