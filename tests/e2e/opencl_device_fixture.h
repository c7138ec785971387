// The fixture of the tests that link through an OpenCL backend::Device directly: the default
// device (Intel's CPU runtime in the IntelOpenCl configuration, DEVDL_TEST_INTEL_OPENCL; else
// whatever the ICD loader offers, the test skipped, saying why, where there is none), the test
// images read as link inputs, and a kernel of a program run.
#pragma once

#include "backend/opencl/opencl_device.h"
#include "e2e/opencl_run.h"
#include "image/read_image.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace devdl::test {

class OnOpenClDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    const bool intel = std::getenv("DEVDL_TEST_INTEL_OPENCL");
    if (intel) setenv("OCL_ICD_VENDORS", DEVDL_TEST_INTEL_OPENCL_ICD, 1);
    auto device = backend::opencl::Device::openDefault();
    if (!device && intel) FAIL() << DEVDL_TEST_INTEL_OPENCL_ICD << ": " << llvm::toString(device.takeError());
    if (!device) GTEST_SKIP() << "no OpenCL device to run on: " << llvm::toString(device.takeError());
    device_ = std::move(*device);
  }
  /// Whether SetUp skipped or failed: a derived SetUp returns then.
  bool notSetUp() const { return IsSkipped() || HasFatalFailure(); }

  /// The test image `name`'s first image, added to the inputs.
  void read(const std::string &name) {
    auto file = readImageFile(image(name));
    ASSERT_TRUE(!!file) << errorText(file);
    files_.push_back(std::move(*file));
    inputs_.push_back({&files_.back().images[0], name + ": image 0 (spirv)"});
  }

  /// `kernel(global int *out)` of `program` run over `n` items: `out`.
  std::vector<int> run(backend::Program &program, const char *kernel, size_t n) {
    auto made = program.kernel(kernel);
    EXPECT_TRUE(!!made) << errorText(made);
    if (!made) return {};
    return runIntKernel(device_->context(), device_->id(), static_cast<cl_kernel>(*made), n);
  }

  std::unique_ptr<backend::opencl::Device> device_;
  std::deque<ImageFile> files_;
  std::vector<backend::LinkInput> inputs_;
};

}  // namespace devdl::test
