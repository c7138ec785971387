// The CUDA driver for the tests and benchmarks: devdl's own list of entry points and what a
// program needs to run kernels, opened from libcuda.so.1 at run time so that they build
// without a CUDA toolkit and skip, saying why, without a driver.
#pragma once

#include "backend/cuda/cuda_types.h"

#include <dlfcn.h>

#include <string>
#include <vector>

namespace devdl::test::cuda {

using namespace devdl::backend::cuda;
using CUstream = struct CUstream_st *;

#define DEVDL_TEST_CUDA_FUNCTIONS(X)                                                   \
  X(cuMemAlloc, (CUdeviceptr *, size_t), "cuMemAlloc_v2")                              \
  X(cuMemFree, (CUdeviceptr), "cuMemFree_v2")                                          \
  X(cuLaunchKernel,                                                                    \
    (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, \
     CUstream, void **, void **),                                                      \
    "cuLaunchKernel")                                                                  \
  X(cuCtxSynchronize, (), "cuCtxSynchronize")

struct Driver {
#define DEVDL_TEST_DECLARE(name, parameters, symbol) CUresult(*name) parameters = nullptr;
  DEVDL_CUDA_FUNCTIONS(DEVDL_TEST_DECLARE)
  DEVDL_TEST_CUDA_FUNCTIONS(DEVDL_TEST_DECLARE)
#undef DEVDL_TEST_DECLARE
};

/// The initialized driver, or null with the reason in `why`.
inline const Driver *driver(std::string *why = nullptr) {
  static std::string error;
  static const Driver *loaded = []() -> const Driver * {
    void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      error = std::string("no CUDA driver: ") + dlerror();
      return nullptr;
    }
    static Driver d;
#define DEVDL_TEST_LOAD(name, parameters, symbol)                                    \
  d.name = reinterpret_cast<decltype(d.name)>(dlsym(library, symbol));               \
  if (!d.name) {                                                                     \
    error = "libcuda.so.1 lacks " symbol;                                            \
    return nullptr;                                                                  \
  }
    DEVDL_CUDA_FUNCTIONS(DEVDL_TEST_LOAD)
    DEVDL_TEST_CUDA_FUNCTIONS(DEVDL_TEST_LOAD)
#undef DEVDL_TEST_LOAD
    if (CUresult err = d.cuInit(0); err != CUDA_SUCCESS) {
      error = "no CUDA device (cuInit: " + std::to_string(err) + ")";
      return nullptr;
    }
    return &d;
  }();
  if (!loaded && why) *why = error;
  return loaded;
}

/// Runs `kernel(int *out)` over `n` threads in one block in `context`, with `sharedBytes` of dynamic
/// shared memory; what it wrote, or an empty vector when a driver call failed.
inline std::vector<int> runIntKernel(const Driver &cu, CUcontext context, void *kernel, unsigned n,
                                     unsigned sharedBytes = 0) {
  std::vector<int> out(n, -1);
  if (cu.cuCtxPushCurrent(context) != CUDA_SUCCESS) return {};
  CUdeviceptr buffer = 0;
  bool ok = cu.cuMemAlloc(&buffer, n * sizeof(int)) == CUDA_SUCCESS;
  void *args[] = {&buffer};
  ok = ok && cu.cuLaunchKernel(static_cast<CUfunction>(kernel), 1, 1, 1, n, 1, 1, sharedBytes, nullptr, args, nullptr) ==
                 CUDA_SUCCESS;
  ok = ok && cu.cuMemcpyDtoH(out.data(), buffer, n * sizeof(int)) == CUDA_SUCCESS;
  if (buffer) cu.cuMemFree(buffer);
  CUcontext popped;
  cu.cuCtxPopCurrent(&popped);
  return ok ? out : std::vector<int>();
}

}  // namespace devdl::test::cuda
