// The OpenCL entry points devdl uses, taken from the ICD loader (libOpenCL.so.1) at run time:
// one build of devdl runs where there is no OpenCL and says so instead of failing to load.
#pragma once

#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <llvm/Support/Error.h>

#include <string>

namespace devdl::backend::opencl {

#define DEVDL_OPENCL_FUNCTIONS(X)                                                             \
  X(clGetPlatformIDs) X(clGetPlatformInfo) X(clGetDeviceIDs) X(clGetDeviceInfo)               \
  X(clCreateContext) X(clRetainContext) X(clReleaseContext) X(clGetContextInfo)               \
  X(clCreateCommandQueueWithProperties) X(clReleaseCommandQueue) X(clFinish)                  \
  X(clCreateProgramWithBinary) X(clCreateProgramWithIL) X(clCreateProgramWithSource)          \
  X(clBuildProgram) X(clCompileProgram)                                                       \
  X(clLinkProgram) X(clGetProgramInfo) X(clGetProgramBuildInfo) X(clReleaseProgram)           \
  X(clCreateKernel) X(clReleaseKernel) X(clGetKernelInfo) X(clSetKernelArg)                   \
  X(clEnqueueNDRangeKernel)                                                                   \
  X(clCreateBuffer) X(clReleaseMemObject) X(clEnqueueReadBuffer)                             \
  X(clGetExtensionFunctionAddressForPlatform)

struct Api {
#define DEVDL_DECLARE(name) decltype(&::name) name = nullptr;
  DEVDL_OPENCL_FUNCTIONS(DEVDL_DECLARE)
#undef DEVDL_DECLARE
  // OpenCL 2.2, where the ICD loader has it (null otherwise): specialization constants of IL.
  decltype(&::clSetProgramSpecializationConstant) clSetProgramSpecializationConstant = nullptr;
};

/// Intel's cl_intel_global_variable_pointers and the copy of cl_intel_unified_shared_memory that
/// reads and writes what it points to, taken from a platform that has them (they are in no
/// Khronos header of this OpenCL's: declared as the extensions' specifications give them).
struct VariablePointers {
  using GetPointer = cl_int(CL_API_CALL *)(cl_device_id device, cl_program program, const char *name,
                                           size_t *size, void **pointer);
  using Memcpy = cl_int(CL_API_CALL *)(cl_command_queue queue, cl_bool blocking, void *destination,
                                       const void *source, size_t size, cl_uint waits, const cl_event *waitList,
                                       cl_event *event);
  GetPointer clGetDeviceGlobalVariablePointerINTEL = nullptr;
  Memcpy clEnqueueMemcpyINTEL = nullptr;
};

/// The ICD loader's entry points, loaded on first use and kept for the life of the process.
/// Fails with NotFound where libOpenCL.so.1 is missing or lacks an entry point.
llvm::Expected<const Api &> api();

/// "CL_BUILD_PROGRAM_FAILURE (-11)".
std::string errorName(cl_int code);

}  // namespace devdl::backend::opencl
