// The end-to-end suite (e2e/dlopen_fixture.h): what DPC++ builds, opened as files: a library DPC++
// built (its offload tables), a host library in DPC++'s form, and SYCL's fallback math library
// linked with an application.
#include "e2e/dlopen_fixture.h"

#include <unistd.h>

#include <cmath>
#include <string>
#include <vector>

namespace devdl::test {
namespace {

// A library DPC++ built (oneMKL's data fitting, as published): devdl reads its offload tables, and
// the driver builds an image's SPIR-V (DPC++'s translator's, 1.4) and makes its kernel, one of
// the 528 the library's SYCL runtime would register. On PoCL through SPIR, on Intel's runtime as IL.
TEST_F(DeviceDlopen, AKernelOfALibraryDpcppBuilt) {
  DEVDL_ONLY_ON_OPENCL("the library carries SPIR-V, which the suite's other backends are not given");
  CommandResult listed = devdl::test::run({DEVDL_NM, DEVDL_TEST_DPCPP_LIBRARY});
  ASSERT_EQ(listed.status, 0) << listed.err;
  std::vector<std::string> kernels;
  for (const std::string &line : linesOf(listed.out))
    if (line.starts_with("K ")) kernels.push_back(line.substr(2));
  ASSERT_EQ(kernels.size(), 528u);
  void *library = device_dlopen(DEVDL_TEST_DPCPP_LIBRARY, DEVDL_LAZY);
  ASSERT_NE(library, nullptr) << error();
  EXPECT_NE(device_dlsym(library, kernels.front().c_str()), nullptr) << error();
  devdl_symbol_info info{};
  info.size = sizeof info;
  ASSERT_EQ(device_dlsyminfo(library, kernels.back().c_str(), &info), 0) << error();
  EXPECT_EQ(info.kind, DEVDL_SYMBOL_KERNEL);
  EXPECT_EQ(info.image, 527u);
  EXPECT_STREQ(info.format, "spirv");
  EXPECT_EQ(device_dlclose(library), 0);
}

// A host library in DPC++'s form (its offload tables, written in C around the seed's SPIR-V):
// opened as a file, its images link with each other as a bundle's do, and the application's
// needs aspect fp64, as its property set says.
TEST_F(DeviceDlopen, AHostLibraryInDpcppsFormLinksItsImages) {
  DEVDL_ONLY_ON_SPIRV("the library carries SPIR-V");
  void *library = device_dlopen(DEVDL_TEST_DPCPP_TABLES, DEVDL_NOW);
  if (!library) {
    const std::string why = error();
    ASSERT_NE(why.find("fp64"), std::string::npos) << why;
    GTEST_SKIP() << deviceWords_ << " lacks aspect fp64: " << why;
  }
  EXPECT_EQ(run(device_dlsym(library, "AppKernel"), 4), (std::vector<int>{0, 2, 4, 6}));
  devdl_symbol_info info{};
  info.size = sizeof info;
  ASSERT_EQ(device_dlsyminfo(library, "LibDeviceFunc", &info), 0) << error();
  EXPECT_EQ(info.image, 0u);
  EXPECT_EQ(device_dlclose(library), 0);
}

// SYCL's fallback math library (libsycl-fallback-cmath.spv of the registry's SYCL runtime): an
// application importing its `__devicelib_` functions, names DPC++ reserves for its device
// libraries and a driver may have built in, links with it where it is loaded (weak imports: left to
// the driver where no image defines them) and computes with it on the device.
TEST_F(DeviceDlopen, AnApplicationLinksWithSyclsFallbackMathLibrary) {
  DEVDL_ONLY_ON_OPENCL("Level Zero here is a test double that translates each module apart with the "
                       "SPIRV-LLVM-Translator 15, which ends the process on this library alone");
  if (access(DEVDL_TEST_SYCL_DEVICELIB, R_OK) != 0) {
    if (kIntelOpenCl) FAIL() << DEVDL_TEST_SYCL_DEVICELIB << " is missing (scripts/setup-debian.sh)";
    GTEST_SKIP() << DEVDL_TEST_SYCL_DEVICELIB << " is missing (scripts/setup-debian.sh unpacks it)";
  }
  const std::string app = image("devicelib_app.spv");
  // Alone, its weak imports go to the link, and the link says this device has none of them built in.
  EXPECT_EQ(device_dlopen(app.c_str(), DEVDL_NOW), nullptr);
  const std::string alone = error();
  EXPECT_NE(alone.find("__devicelib_expf"), std::string::npos) << alone;
  EXPECT_EQ(alone.find("undefined device symbol"), std::string::npos) << "devdl's resolution refused it: " << alone;
  void *library = device_dlopen(DEVDL_TEST_SYCL_DEVICELIB, DEVDL_NOW | DEVDL_GLOBAL);
  ASSERT_NE(library, nullptr) << error();
  void *handle = device_dlopen(app.c_str(), DEVDL_NOW);
  ASSERT_NE(handle, nullptr) << error();
  void *kernel = device_dlsym(handle, "DevicelibKernel");
  ASSERT_NE(kernel, nullptr) << error();
  const std::vector<int> out = run(kernel, 16);
  ASSERT_EQ(out.size(), 16u);
  for (int i = 0; i < 16; ++i) {
    const float x = static_cast<float>(i) / 8.0f;
    const double expected = 1000.0 * (std::exp(x) + std::sin(x) + std::hypot(x, 1.0f));
    EXPECT_NEAR(out[i], expected, 2.0) << "work-item " << i;
  }
  const char *plan = device_dlplan(handle, "DevicelibKernel");
  ASSERT_NE(plan, nullptr) << error();
  const std::string where = std::string(DEVDL_TEST_SYCL_DEVICELIB) + ": image 0 (spirv)";
  for (const char *name : {"__devicelib_expf", "__devicelib_sinf", "__devicelib_hypotf"})
    EXPECT_NE(std::string(plan).find(std::string(name) + " (" + app + ": image 0 (spirv)) -> " + where),
              std::string::npos)
        << plan;
  EXPECT_EQ(device_dlclose(handle), 0);
  EXPECT_EQ(device_dlclose(library), 0);
}

}  // namespace
}  // namespace devdl::test
