// The Level Zero test driver (tests/level_zero_driver) through the real loader (libze1): the
// rules of the specification devdl depends on, each checked, and kernels that run on PoCL. The
// devdl backend's own tests stand on these.
#include "e2e/level_zero_run.h"
#include "test_support.h"

#include <level_zero/ze_api.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

using devdl::test::image;

const bool kAltDriver = [] { return setenv("ZE_ENABLE_ALT_DRIVERS", DEVDL_TEST_ZE_DRIVER, 1) == 0; }();

std::string bytesOf(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string logText(ze_module_build_log_handle_t log) {
  if (!log) return {};
  size_t size = 0;
  zeModuleBuildLogGetString(log, &size, nullptr);
  std::string text(size, '\0');
  zeModuleBuildLogGetString(log, &size, text.data());
  zeModuleBuildLogDestroy(log);
  if (!text.empty()) text.pop_back();
  return text;
}

class LevelZeroDriver : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kAltDriver);
    ASSERT_EQ(zeInit(0), ZE_RESULT_SUCCESS) << "the loader did not take the test driver " DEVDL_TEST_ZE_DRIVER;
    uint32_t count = 1;
    ASSERT_EQ(zeDriverGet(&count, &driver_), ZE_RESULT_SUCCESS);
    count = 1;
    ASSERT_EQ(zeDeviceGet(driver_, &count, &device_), ZE_RESULT_SUCCESS);
    ze_context_desc_t desc = {ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
    ASSERT_EQ(zeContextCreate(driver_, &desc, &context_), ZE_RESULT_SUCCESS);
  }
  void TearDown() override {
    for (ze_module_handle_t module : modules_) zeModuleDestroy(module);
    if (context_) zeContextDestroy(context_);
  }

  // A module of one SPIR-V file; its build log in `log`.
  ze_result_t create(const std::string &file, const char *flags, ze_module_handle_t *module, std::string *log = nullptr,
                     const ze_module_constants_t *constants = nullptr) {
    const std::string &bytes = kept_.emplace_back(bytesOf(image(file)));
    ze_module_desc_t desc = {ZE_STRUCTURE_TYPE_MODULE_DESC, nullptr, ZE_MODULE_FORMAT_IL_SPIRV, bytes.size(),
                             reinterpret_cast<const uint8_t *>(bytes.data()), flags, constants};
    ze_module_build_log_handle_t buildLog = nullptr;
    const ze_result_t result = zeModuleCreate(context_, device_, &desc, module, &buildLog);
    lastLog_ = logText(buildLog);
    if (log) *log = lastLog_;
    if (result == ZE_RESULT_SUCCESS) modules_.push_back(*module);
    return result;
  }

  ze_result_t link(std::vector<ze_module_handle_t> modules, std::string *log = nullptr) {
    ze_module_build_log_handle_t buildLog = nullptr;
    const ze_result_t result = zeModuleDynamicLink(static_cast<uint32_t>(modules.size()), modules.data(), &buildLog);
    const std::string text = logText(buildLog);
    if (log) *log = text;
    return result;
  }

  // Runs `name` of `module` over n work-items with one int buffer; its contents.
  std::vector<int> run(ze_module_handle_t module, const char *name, uint32_t n = 8) {
    ze_kernel_desc_t desc = {ZE_STRUCTURE_TYPE_KERNEL_DESC, nullptr, 0, name};
    ze_kernel_handle_t kernel = nullptr;
    EXPECT_EQ(zeKernelCreate(module, &desc, &kernel), ZE_RESULT_SUCCESS);
    if (!kernel) return {};
    std::vector<int> result = devdl::test::runIntKernel(context_, device_, kernel, n);
    zeKernelDestroy(kernel);
    return result;
  }

  ze_driver_handle_t driver_ = nullptr;
  ze_device_handle_t device_ = nullptr;
  ze_context_handle_t context_ = nullptr;
  std::vector<ze_module_handle_t> modules_;
  std::vector<std::string> kept_;
  std::string lastLog_;  // of the last create
};

const std::vector<int> kSeed = {0, 2, 4, 6, 8, 10, 12, 14};

TEST_F(LevelZeroDriver, ReportsItsDeviceAndExtensions) {
  ze_device_properties_t properties{};
  properties.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
  ASSERT_EQ(zeDeviceGetProperties(device_, &properties), ZE_RESULT_SUCCESS);
  EXPECT_NE(std::string(properties.name).find("PoCL"), std::string::npos) << properties.name;
  auto extensions = [&] {
    uint32_t count = 0;
    zeDriverGetExtensionProperties(driver_, &count, nullptr);
    std::vector<ze_driver_extension_properties_t> listed(count);
    zeDriverGetExtensionProperties(driver_, &count, listed.data());
    std::string names;
    for (const auto &e : listed) names += std::string(e.name) + " ";
    return names;
  };
  EXPECT_NE(extensions().find(ZE_MODULE_PROGRAM_EXP_NAME), std::string::npos);
  setenv("DEVDL_TEST_ZE_MODULE_PROGRAM", "0", 1);
  EXPECT_EQ(extensions().find(ZE_MODULE_PROGRAM_EXP_NAME), std::string::npos);
  unsetenv("DEVDL_TEST_ZE_MODULE_PROGRAM");
}

TEST_F(LevelZeroDriver, ModuleWithImportsIsUnlinkedUntilDynamicLink) {
  ze_module_handle_t lib = nullptr, app = nullptr;
  ASSERT_EQ(create("lib.spv", "-library-compilation", &lib), ZE_RESULT_SUCCESS) << lastLog_;
  ASSERT_EQ(create("app.spv", "", &app), ZE_RESULT_SUCCESS) << lastLog_;
  ze_kernel_desc_t desc = {ZE_STRUCTURE_TYPE_KERNEL_DESC, nullptr, 0, "AppKernel"};
  ze_kernel_handle_t kernel = nullptr;
  EXPECT_EQ(zeKernelCreate(app, &desc, &kernel), ZE_RESULT_ERROR_INVALID_MODULE_UNLINKED);
  std::string log;
  ASSERT_EQ(link({app, lib}, &log), ZE_RESULT_SUCCESS) << log;
  EXPECT_EQ(run(app, "AppKernel"), kSeed);
}

TEST_F(LevelZeroDriver, LinkMissingAModuleFailsNamingTheSymbol) {
  ze_module_handle_t app = nullptr;
  ASSERT_EQ(create("app.spv", "", &app), ZE_RESULT_SUCCESS) << lastLog_;
  std::string log;
  EXPECT_EQ(link({app}, &log), ZE_RESULT_ERROR_MODULE_LINK_FAILURE);
  EXPECT_NE(log.find("`LibDeviceFunc`"), std::string::npos) << log;
}

TEST_F(LevelZeroDriver, ExportsOnlyWithLibraryCompilation) {
  ze_module_handle_t lib = nullptr, app = nullptr;
  ASSERT_EQ(create("lib.spv", "", &lib), ZE_RESULT_SUCCESS) << lastLog_;
  ASSERT_EQ(create("app.spv", "", &app), ZE_RESULT_SUCCESS) << lastLog_;
  std::string log;
  EXPECT_EQ(link({app, lib}, &log), ZE_RESULT_ERROR_MODULE_LINK_FAILURE);
  EXPECT_NE(log.find("`LibDeviceFunc`"), std::string::npos) << log;
}

TEST_F(LevelZeroDriver, VariablesHaveAddressesOnlyWithTakeGlobalAddress) {
  ze_module_handle_t plain = nullptr, taken = nullptr;
  ASSERT_EQ(create("lib.spv", "-library-compilation", &plain), ZE_RESULT_SUCCESS) << lastLog_;
  ASSERT_EQ(create("lib.spv", "-library-compilation -ze-take-global-address", &taken), ZE_RESULT_SUCCESS) << lastLog_;
  void *address = nullptr;
  size_t size = 0;
  EXPECT_EQ(zeModuleGetGlobalPointer(plain, "LibCounter", &size, &address), ZE_RESULT_ERROR_INVALID_GLOBAL_NAME);
  ASSERT_EQ(zeModuleGetGlobalPointer(taken, "LibCounter", &size, &address), ZE_RESULT_SUCCESS);
  EXPECT_EQ(size, sizeof(int));
  EXPECT_EQ(*static_cast<int *>(address), 7) << "its initial value (the CPU device's memory is the host's)";
  EXPECT_EQ(zeModuleGetGlobalPointer(taken, "NoSuchVariable", &size, &address), ZE_RESULT_ERROR_INVALID_GLOBAL_NAME);
}

TEST_F(LevelZeroDriver, AmbiguousExportsAreRefused) {
  ze_module_handle_t lib = nullptr, again = nullptr, app = nullptr;
  ASSERT_EQ(create("lib.spv", "-library-compilation", &lib), ZE_RESULT_SUCCESS) << lastLog_;
  ASSERT_EQ(create("lib.spv", "-library-compilation", &again), ZE_RESULT_SUCCESS) << lastLog_;
  ASSERT_EQ(create("app.spv", "", &app), ZE_RESULT_SUCCESS) << lastLog_;
  std::string log;
  EXPECT_EQ(link({app, lib, again}, &log), ZE_RESULT_ERROR_MODULE_LINK_FAILURE);
  EXPECT_NE(log.find("ambiguous"), std::string::npos) << log;
}

TEST_F(LevelZeroDriver, AnExportingModuleServesLaterLinks) {
  ze_module_handle_t lib = nullptr, first = nullptr, second = nullptr;
  ASSERT_EQ(create("lib.spv", "-library-compilation", &lib), ZE_RESULT_SUCCESS) << lastLog_;
  ASSERT_EQ(create("app.spv", "", &first), ZE_RESULT_SUCCESS) << lastLog_;
  ASSERT_EQ(create("app.spv", "", &second), ZE_RESULT_SUCCESS) << lastLog_;
  ASSERT_EQ(link({first, lib}), ZE_RESULT_SUCCESS);
  EXPECT_EQ(run(first, "AppKernel"), kSeed);
  ASSERT_EQ(link({second, lib}), ZE_RESULT_SUCCESS);
  EXPECT_EQ(run(second, "AppKernel"), kSeed);
}

TEST_F(LevelZeroDriver, ModuleProgramLinksItsInputsAtCreation) {
  const std::string lib = bytesOf(image("lib.spv")), app = bytesOf(image("app.spv"));
  const uint8_t *inputs[] = {reinterpret_cast<const uint8_t *>(app.data()), reinterpret_cast<const uint8_t *>(lib.data())};
  const size_t sizes[] = {app.size(), lib.size()};
  const char *flags[] = {"", "-library-compilation"};
  ze_module_program_exp_desc_t program = {ZE_STRUCTURE_TYPE_MODULE_PROGRAM_EXP_DESC, nullptr, 2, sizes, inputs, flags, nullptr};
  ze_module_desc_t desc = {ZE_STRUCTURE_TYPE_MODULE_DESC, &program, ZE_MODULE_FORMAT_IL_SPIRV, 0, nullptr, nullptr, nullptr};
  ze_module_handle_t module = nullptr;
  ze_module_build_log_handle_t log = nullptr;
  ASSERT_EQ(zeModuleCreate(context_, device_, &desc, &module, &log), ZE_RESULT_SUCCESS) << logText(log);
  logText(log);
  modules_.push_back(module);
  EXPECT_EQ(run(module, "AppKernel"), kSeed);
}

TEST_F(LevelZeroDriver, NativeBinaryLoadsBack) {
  ze_module_handle_t module = nullptr;
  ASSERT_EQ(create("kernel_lib.spv", "", &module), ZE_RESULT_SUCCESS) << lastLog_;
  size_t size = 0;
  ASSERT_EQ(zeModuleGetNativeBinary(module, &size, nullptr), ZE_RESULT_SUCCESS);
  std::string binary(size, '\0');
  ASSERT_EQ(zeModuleGetNativeBinary(module, &size, reinterpret_cast<uint8_t *>(binary.data())), ZE_RESULT_SUCCESS);
  ze_module_desc_t desc = {ZE_STRUCTURE_TYPE_MODULE_DESC, nullptr, ZE_MODULE_FORMAT_NATIVE, binary.size(),
                           reinterpret_cast<const uint8_t *>(binary.data()), nullptr, nullptr};
  ze_module_handle_t loaded = nullptr;
  ASSERT_EQ(zeModuleCreate(context_, device_, &desc, &loaded, nullptr), ZE_RESULT_SUCCESS);
  modules_.push_back(loaded);
  EXPECT_EQ(run(loaded, "LibKernel"), run(module, "LibKernel"));
  binary[0] ^= 1;
  desc.pInputModule = reinterpret_cast<const uint8_t *>(binary.data());
  ze_module_handle_t refused = nullptr;
  EXPECT_EQ(zeModuleCreate(context_, device_, &desc, &refused, nullptr), ZE_RESULT_ERROR_MODULE_BUILD_FAILURE);
}

TEST_F(LevelZeroDriver, SpecializationConstantsChangeTheKernel) {
  ze_module_handle_t plain = nullptr, specialized = nullptr;
  ASSERT_EQ(create("spec_kernel.spv", "", &plain), ZE_RESULT_SUCCESS) << lastLog_;
  const uint32_t ids[] = {3, 7};
  const uint32_t scale = 10, offset = 1;
  const void *values[] = {&scale, &offset};
  ze_module_constants_t constants = {2, ids, values};
  ASSERT_EQ(create("spec_kernel.spv", "", &specialized, nullptr, &constants), ZE_RESULT_SUCCESS) << lastLog_;
  EXPECT_EQ(run(plain, "SpecKernel", 4), (std::vector<int>{5, 8, 11, 14}));
  EXPECT_EQ(run(specialized, "SpecKernel", 4), (std::vector<int>{1, 11, 21, 31}));
}

}  // namespace
