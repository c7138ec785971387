// Where the test images are, and skipping a test where no compiler made some of them; apart from
// test_support.h so that the GPU tests, which link no LLVM, can use it.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace devdl::test {

/// A test image built from tests/data at build time; in the folder DEVDL_TEST_IMAGES names
/// where that variable is set (the images moved to the GPU machine).
inline std::string image(const std::string &name) {
  const char *moved = std::getenv("DEVDL_TEST_IMAGES");
  return std::string(moved && *moved ? moved : DEVDL_TEST_IMAGES) + "/" + name;
}

}  // namespace devdl::test

/// Skips a test where no CUDA toolkit built the CUDA images.
#define DEVDL_REQUIRE_CUDA_IMAGES()                                                          \
  do {                                                                                       \
    if (!DEVDL_TEST_CUDA_IMAGES)                                                             \
      GTEST_SKIP() << "nvcc was not found at build time (PATH, /usr/local/cuda/bin): no "    \
                      "CUDA test images";                                                    \
  } while (0)

/// Skips a test where no ocloc made the Intel native test images.
#define DEVDL_REQUIRE_INTEL_IMAGES()                                                                \
  do {                                                                                              \
    if (!DEVDL_TEST_INTEL_IMAGES)                                                                   \
      GTEST_SKIP() << "no ocloc at build time (scripts/setup-debian.sh unpacks it into /opt/devdl-ocloc): " \
                      "no Intel native test images";                                                \
  } while (0)
