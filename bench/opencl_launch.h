// A kernel(global int *out) launched on one work-item of `device`, in its program's context, and
// waited for: the first launch the benchmarks time (where PoCL compiles the kernel).
#pragma once

#include "backend/opencl/opencl_api.h"

namespace devdl::bench {

inline bool launchOnOneWorkItem(const backend::opencl::Api &cl, cl_device_id device, cl_kernel kernel) {
  cl_context context = nullptr;
  cl.clGetKernelInfo(kernel, CL_KERNEL_CONTEXT, sizeof context, &context, nullptr);
  cl_command_queue queue = cl.clCreateCommandQueueWithProperties(context, device, nullptr, nullptr);
  cl_mem buffer = cl.clCreateBuffer(context, CL_MEM_WRITE_ONLY, sizeof(int), nullptr, nullptr);
  const size_t one = 1;
  const bool ran = cl.clSetKernelArg(kernel, 0, sizeof buffer, &buffer) == CL_SUCCESS &&
                   cl.clEnqueueNDRangeKernel(queue, kernel, 1, nullptr, &one, nullptr, 0, nullptr, nullptr) == CL_SUCCESS &&
                   cl.clFinish(queue) == CL_SUCCESS;
  cl.clReleaseMemObject(buffer);
  cl.clReleaseCommandQueue(queue);
  return ran;
}

}  // namespace devdl::bench
