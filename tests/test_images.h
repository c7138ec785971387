// Skipping a test where no CUDA toolkit built the CUDA images; apart from test_support.h so
// that the GPU tests, which link no LLVM, can use it.
#pragma once

#include <gtest/gtest.h>

#define DEVDL_REQUIRE_CUDA_IMAGES()                                                          \
  do {                                                                                       \
    if (!DEVDL_TEST_CUDA_IMAGES)                                                             \
      GTEST_SKIP() << "nvcc was not found at build time (PATH, /usr/local/cuda/bin): no "    \
                      "CUDA test images";                                                    \
  } while (0)
