// The end-to-end suite (e2e/dlopen_fixture.h): what DPC++ builds, opened as files: a library DPC++
// built (its offload tables), a host library in DPC++'s form, SYCL's SPIR-V device libraries
// (those Debian's SPIRV-Tools cannot vouch for too) linked with applications, and oneMKL's BLAS.
#include "e2e/dlopen_fixture.h"

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
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
  // Looked up again and again, the failed build is given again (not built again: LoaderPrograms).
  void *lazy = device_dlopen(app.c_str(), DEVDL_LAZY);
  ASSERT_NE(lazy, nullptr) << error();
  EXPECT_EQ(device_dlsym(lazy, "DevicelibKernel"), nullptr);
  const std::string failed = error();
  EXPECT_NE(failed.find("__devicelib_expf"), std::string::npos) << failed;
  EXPECT_EQ(device_dlsym(lazy, "DevicelibKernel"), nullptr);
  EXPECT_EQ(error(), failed);
  EXPECT_EQ(device_dlclose(lazy), 0);
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

// SYCL's 25 SPIR-V device libraries (intel-sycl-rt 2025.3.3, unpacked by the setup): each is
// listed by devdl-nm and opens, its exports found where devdl-nm lists them. Four declare
// extensions newer than Debian's SPIRV-Tools, whose validator cannot vouch for them: devdl-nm says
// so on the side and lists them all the same.
TEST_F(DeviceDlopen, SyclsSpirvDeviceLibrariesOpenAndList) {
  DEVDL_ONLY_ON_OPENCL("Level Zero here is a test double that translates each module with the "
                       "SPIRV-LLVM-Translator 15, which knows none of these extensions");
  std::vector<std::string> files;
  if (access(DEVDL_TEST_SYCL_SPIRV_DIR, R_OK) == 0)
    for (const auto &entry : std::filesystem::directory_iterator(DEVDL_TEST_SYCL_SPIRV_DIR))
      if (entry.path().extension() == ".spv") files.push_back(entry.path().string());
  if (files.size() != 25) {
    if (kIntelOpenCl) FAIL() << DEVDL_TEST_SYCL_SPIRV_DIR << " has " << files.size() << " of the 25 libraries";
    GTEST_SKIP() << DEVDL_TEST_SYCL_SPIRV_DIR << " has " << files.size() << " of the 25 libraries (scripts/setup-debian.sh)";
  }
  size_t unvouched = 0;
  for (const std::string &file : files) {
    CommandResult listed = devdl::test::run({DEVDL_NM, "--defined-only", file});
    ASSERT_EQ(listed.status, 0) << file << ": " << listed.err;
    const bool vouched = listed.err.find("not validated (SPIRV-Tools could not vouch for it") == std::string::npos;
    unvouched += !vouched;
    void *library = device_dlopen(file.c_str(), DEVDL_LAZY);
    ASSERT_NE(library, nullptr) << file << ": " << error();
    // Where devdl links and translates (PoCL), an image it cannot vouch for is found and said not
    // to link there.
    for (const std::string &line : linesOf(listed.out)) {
      devdl_symbol_info info{};
      info.size = sizeof info;
      if (vouched || kIntelOpenCl) {
        EXPECT_EQ(device_dlsyminfo(library, line.substr(2).c_str(), &info), 0) << file << ": " << line << ": " << error();
      } else {
        EXPECT_EQ(device_dlsyminfo(library, line.substr(2).c_str(), &info), -1);
        EXPECT_NE(error().find("devdl's SPIR-V validator could not vouch for it"), std::string::npos) << file;
      }
    }
    EXPECT_EQ(device_dlclose(library), 0);
  }
  EXPECT_EQ(unvouched, 4u);
}

// Functions of those four, linked with an application: on a driver that compiles and links SPIR-V
// itself (Intel's runtime) they compute what the host does; where devdl links and translates (PoCL),
// the open fails saying why, before anything runs on those modules.
TEST_F(DeviceDlopen, AnApplicationOfTheSyclLibrariesTheValidatorCannotVouchFor) {
  DEVDL_ONLY_ON_OPENCL("Level Zero here is a test double that translates each module with the "
                       "SPIRV-LLVM-Translator 15, which knows none of these extensions");
  const std::string dir = DEVDL_TEST_SYCL_SPIRV_DIR;
  if (access((dir + "/libsycl-native-bfloat16.spv").c_str(), R_OK) != 0) {
    if (kIntelOpenCl) FAIL() << dir << " is missing (scripts/setup-debian.sh)";
    GTEST_SKIP() << dir << " is missing (scripts/setup-debian.sh unpacks it)";
  }
  constexpr int kItems = 16;
  for (const char *bfloat16 : {"libsycl-bfloat16.spv", "libsycl-native-bfloat16.spv"}) {
    std::vector<void *> libraries;
    for (const std::string name : {"libsycl-fallback-imf.spv", "libsycl-fallback-imf-fp64.spv", bfloat16}) {
      libraries.push_back(device_dlopen((dir + "/" + name).c_str(), DEVDL_LAZY | DEVDL_GLOBAL));
      ASSERT_NE(libraries.back(), nullptr) << name << ": " << error();
    }
    void *app = device_dlopen(image("sycl_libs_app.spv").c_str(), DEVDL_NOW);
    if (!kIntelOpenCl && !app) {
      const std::string why = error();
      EXPECT_NE(why.find("left to the driver, is undefined there ("), std::string::npos) << why;
      EXPECT_NE(why.find("devdl's SPIR-V validator could not vouch for it ("), std::string::npos) << why;
      EXPECT_NE(why.find("takes SPIR-V only through devdl's own link and translation"), std::string::npos) << why;
      for (void *library : libraries) EXPECT_EQ(device_dlclose(library), 0);
      continue;
    }
    ASSERT_NE(app, nullptr) << bfloat16 << ": " << error();
    const std::vector<int> out = run(device_dlsym(app, "SyclLibsKernel"), kItems * 6);
    ASSERT_EQ(out.size(), size_t(kItems * 6));
    for (int i = 0; i < kItems; ++i) {
      const float x = static_cast<float>(i * 1000003 - 5000000) * (1.0f / 1024.0f);
      uint32_t bits;
      std::memcpy(&bits, &x, sizeof bits);
      const uint32_t bf16 = (bits + 0x7fff + ((bits >> 16) & 1)) >> 16;  // to nearest, ties to even
      const uint32_t backBits = bf16 << 16;
      float back;
      std::memcpy(&back, &backBits, sizeof back);
      uint32_t reversed = 0;
      for (int bit = 0; bit < 32; ++bit) reversed |= ((uint32_t(i) >> bit) & 1u) << (31 - bit);
      const std::vector<int> expected = {std::abs(i - 5), static_cast<int>(reversed),
                                         static_cast<int>(std::nearbyint(std::fma(x, 2.0f, 0.5f))),
                                         static_cast<int>(std::nearbyint(std::fma(double(x), 3.0, 0.25))),
                                         static_cast<int>(bf16), static_cast<int>(back * 1000.0f)};
      EXPECT_EQ(std::vector<int>(out.begin() + 6 * i, out.begin() + 6 * i + 6), expected) << bfloat16 << ", work-item " << i;
    }
    EXPECT_EQ(device_dlclose(app), 0);
    for (void *library : libraries) EXPECT_EQ(device_dlclose(library), 0);
  }
}

// oneMKL's BLAS for SYCL (80 MB, 3,708 SPIR-V images; some with those extensions): listed whole.
TEST_F(DeviceDlopen, OneMklsBlasIsListedWhole) {
  DEVDL_ONLY_ON_OPENCL("the library carries SPIR-V; listed once");
  if (access(DEVDL_TEST_ONEMKL_BLAS, R_OK) != 0) {
    if (kIntelOpenCl) FAIL() << DEVDL_TEST_ONEMKL_BLAS << " is missing (scripts/setup-debian.sh)";
    GTEST_SKIP() << DEVDL_TEST_ONEMKL_BLAS << " is missing (scripts/setup-debian.sh unpacks it)";
  }
  CommandResult listed = devdl::test::run({DEVDL_NM, DEVDL_TEST_ONEMKL_BLAS});
  ASSERT_EQ(listed.status, 0) << listed.err.substr(0, 2000);
  size_t images = 0, kernels = 0;
  for (const std::string &line : linesOf(listed.out)) {
    images += line.find("(image ") != std::string::npos;
    kernels += line.starts_with("K ");
  }
  EXPECT_EQ(images, 3708u);
  EXPECT_GT(kernels, 3000u);
  EXPECT_NE(listed.err.find("image 7 (spirv): not validated (SPIRV-Tools could not vouch for it: Invalid capability "
                            "operand: 6115"),
            std::string::npos)
      << listed.err.substr(0, 2000);
}

}  // namespace
}  // namespace devdl::test
