// Running a `kernel(global int *out)` on an OpenCL device and reading `out` back, for the
// end-to-end tests.
#pragma once

#include "backend/opencl/opencl_api.h"
#include "devdl.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <thread>
#include <vector>

namespace devdl::test {

/// The OpenCL device devdl links for (device_dlnative) into `context` and `device`; false where
/// there is none, device_dlerror() saying why.
inline bool devdlOpenClDevice(cl_context &context, cl_device_id &device) {
  devdl_native native{};
  native.size = sizeof native;
  native.backend = DEVDL_BACKEND_OPENCL;
  if (device_dlnative(&native) != 0) return false;
  context = static_cast<cl_context>(native.context);
  device = static_cast<cl_device_id>(native.device);
  return true;
}

inline std::vector<int> runIntKernel(cl_context context, cl_device_id device, cl_kernel kernel, size_t n) {
  auto api = backend::opencl::api();
  EXPECT_TRUE(!!api);
  if (!api) {
    llvm::consumeError(api.takeError());
    return {};
  }
  const backend::opencl::Api &cl = *api;
  cl_int err = CL_SUCCESS;
  cl_command_queue queue = cl.clCreateCommandQueueWithProperties(context, device, nullptr, &err);
  EXPECT_EQ(err, CL_SUCCESS);
  cl_mem out = cl.clCreateBuffer(context, CL_MEM_WRITE_ONLY, n * sizeof(int), nullptr, &err);
  EXPECT_EQ(err, CL_SUCCESS);
  EXPECT_EQ(cl.clSetKernelArg(kernel, 0, sizeof out, &out), CL_SUCCESS);
  EXPECT_EQ(cl.clEnqueueNDRangeKernel(queue, kernel, 1, nullptr, &n, nullptr, 0, nullptr, nullptr), CL_SUCCESS);
  std::vector<int> result(n, -1);
  EXPECT_EQ(cl.clEnqueueReadBuffer(queue, out, CL_TRUE, 0, n * sizeof(int), result.data(), 0, nullptr, nullptr),
            CL_SUCCESS);
  cl.clReleaseMemObject(out);
  cl.clReleaseCommandQueue(queue);
  return result;
}

/// `threads` threads each look up kernel `name` in `handle` and launch it with their own buffer,
/// `rounds` times, on `device` in `context`: each must get the same object at each lookup, and
/// every result must be `expected`. Then every thread's object must be its own. Each thread's
/// object goes as it ends: all stay until all are compared, so that no thread's is made where an
/// ended one's was.
inline void expectEachThreadLaunchesItsOwnKernel(void *handle, const char *name, cl_context context,
                                                 cl_device_id device, const std::vector<int> &expected,
                                                 int threads = 8, int rounds = 20) {
  std::atomic<int> wrong{0};
  std::vector<void *> kernels(threads);
  std::barrier done(threads);
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t)
    running.emplace_back([&, t] {
      for (int round = 0; round < rounds; ++round) {
        void *kernel = device_dlsym(handle, name);
        if (!kernels[t]) kernels[t] = kernel;
        if (kernel != kernels[t] ||
            runIntKernel(context, device, static_cast<cl_kernel>(kernel), expected.size()) != expected)
          ++wrong;
      }
      done.arrive_and_wait();
    });
  for (auto &t : running) t.join();
  EXPECT_EQ(wrong.load(), 0);
  std::sort(kernels.begin(), kernels.end());
  EXPECT_EQ(std::unique(kernels.begin(), kernels.end()), kernels.end()) << "a kernel object for each thread";
}

}  // namespace devdl::test
