// The CUDA driver API as devdl uses it: types, constants and the entry points, declared here
// with the driver's stable C ABI (cuda.h) so that building devdl needs no CUDA toolkit. No
// LLVM here: the GPU tests use it beside libdevdl.so alone.
#pragma once

#include <cstddef>

namespace devdl::backend::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUlinkState = struct CUlinkState_st *;

inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;

enum CUjit_option : int {
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
};

enum CUjitInputType : int {
  CU_JIT_INPUT_CUBIN = 0,
  CU_JIT_INPUT_PTX = 1,
  CU_JIT_INPUT_FATBINARY = 2,
};

enum CUdevice_attribute : int {
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
};

// name, parameters, and the versioned symbol cuda.h maps the name to; each returns CUresult.
#define DEVDL_CUDA_FUNCTIONS(X)                                                                       \
  X(cuInit, (unsigned), "cuInit")                                                         \
  X(cuDriverGetVersion, (int *), "cuDriverGetVersion")                                    \
  X(cuGetErrorName, (CUresult, const char **), "cuGetErrorName")                          \
  X(cuDeviceGetCount, (int *), "cuDeviceGetCount")                                        \
  X(cuDeviceGet, (CUdevice *, int), "cuDeviceGet")                                        \
  X(cuDeviceGetName, (char *, int, CUdevice), "cuDeviceGetName")                          \
  X(cuDeviceGetAttribute, (int *, CUdevice_attribute, CUdevice), "cuDeviceGetAttribute")  \
  X(cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice), "cuDevicePrimaryCtxRetain")        \
  X(cuDevicePrimaryCtxRelease, (CUdevice), "cuDevicePrimaryCtxRelease_v2")                \
  X(cuCtxGetCurrent, (CUcontext *), "cuCtxGetCurrent")                                    \
  X(cuCtxGetDevice, (CUdevice *), "cuCtxGetDevice")                                       \
  X(cuCtxPushCurrent, (CUcontext), "cuCtxPushCurrent_v2")                                 \
  X(cuCtxPopCurrent, (CUcontext *), "cuCtxPopCurrent_v2")                                 \
  X(cuLinkCreate, (unsigned, CUjit_option *, void **, CUlinkState *), "cuLinkCreate_v2")  \
  X(cuLinkAddData,                                                                                    \
    (CUlinkState, CUjitInputType, void *, size_t, const char *, unsigned, CUjit_option *, \
                 void **),                                                                            \
    "cuLinkAddData_v2")                                                                               \
  X(cuLinkComplete, (CUlinkState, void **, size_t *), "cuLinkComplete")                   \
  X(cuLinkDestroy, (CUlinkState), "cuLinkDestroy")                                        \
  X(cuModuleLoadData, (CUmodule *, const void *), "cuModuleLoadData")                     \
  X(cuModuleUnload, (CUmodule), "cuModuleUnload")                                         \
  X(cuModuleGetFunction, (CUfunction *, CUmodule, const char *), "cuModuleGetFunction")   \
  X(cuFuncGetModule, (CUmodule *, CUfunction), "cuFuncGetModule")                         \
  X(cuModuleGetGlobal, (CUdeviceptr *, size_t *, CUmodule, const char *), "cuModuleGetGlobal_v2") \
  X(cuMemcpyHtoD, (CUdeviceptr, const void *, size_t), "cuMemcpyHtoD_v2")                 \
  X(cuMemcpyDtoH, (void *, CUdeviceptr, size_t), "cuMemcpyDtoH_v2")

struct Api {
#define DEVDL_DECLARE(name, parameters, symbol) CUresult(*name) parameters = nullptr;
  DEVDL_CUDA_FUNCTIONS(DEVDL_DECLARE)
#undef DEVDL_DECLARE
};

}  // namespace devdl::backend::cuda
