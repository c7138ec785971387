// The fixture of the CUDA tests: the driver and the context devdl runs kernels in
// (device_dlnative), the test skipped, saying why, where nvcc made no test images or there is no
// GPU. `Base` is ::testing::Test or a parameterized test's base.
#pragma once

#include "test_basics.h"
#include "devdl.h"
#include "e2e/cuda_driver.h"
#include "test_images.h"

#include <gtest/gtest.h>

#include <string>

namespace devdl::test {

template <typename Base = ::testing::Test>
class OnCuda : public Base {
 protected:
  void SetUp() override {
    DEVDL_REQUIRE_CUDA_IMAGES();
    std::string why;
    cu_ = cuda::driver(&why);
    if (!cu_) GTEST_SKIP() << "no GPU to run on: " << why;
    native_.size = sizeof native_;
    native_.backend = DEVDL_BACKEND_CUDA;
    ASSERT_EQ(device_dlnative(&native_), 0) << error();
    ASSERT_EQ(native_.backend, DEVDL_BACKEND_CUDA);
    context_ = static_cast<cuda::CUcontext>(native_.context);
  }
  /// Whether SetUp skipped or failed: a derived SetUp returns then.
  bool notSetUp() const { return this->IsSkipped() || this->HasFatalFailure(); }

  const cuda::Driver *cu_ = nullptr;
  cuda::CUcontext context_ = nullptr;
  devdl_native native_{};
};

}  // namespace devdl::test
