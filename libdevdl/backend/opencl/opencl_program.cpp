// A program built on an OpenCL device: its kernels, and its variables as the host reaches them:
// in host memory where devdl placed them there, else at the driver's address where it gives one
// (cl_intel_global_variable_pointers), else through the copy kernels devdl linked into it. A
// program linked in parts answers each name from the part that holds it.
#include "backend/opencl/opencl_program.h"
#include "backend/opencl/kept_regions.h"
#include "backend/opencl/opencl_info.h"
#include "backend/spirv/copy_kernels.h"
#include "backend/spirv/place_variables.h"

#include "support/error.h"

#include <cstring>

namespace devdl::backend::opencl {

Program::~Program() {
  kernels_.releaseAll();  // each holds the program: whether others hold it is asked next
  if (variables_ && heldByOthers(api_, program_)) {
    keepWhileHeld(program_, std::move(variables_));
  } else {
    api_.clReleaseProgram(program_);
  }
  sweepKept(api_);
}

llvm::Expected<void *> Program::kernel(std::string_view name) {
  return kernels_.get(
      name,
      [&]() -> llvm::Expected<cl_kernel> {
        cl_int err = CL_SUCCESS;
        cl_kernel kernel = api_.clCreateKernel(program_, std::string(name).c_str(), &err);
        if (err != CL_SUCCESS)
          return fail(ErrorCode::NotFound, "kernel `" + llvm::Twine(name) + "`: " + errorName(err));
        return kernel;
      });
}

llvm::Expected<std::pair<void *, size_t>> Program::driverAddress(std::string_view name) const {
  size_t size = 0;
  void *pointer = nullptr;
  if (cl_int err = pointers_.clGetDeviceGlobalVariablePointerINTEL(id_, program_, std::string(name).c_str(), &size,
                                                                    &pointer);
      err != CL_SUCCESS)
    return fail(ErrorCode::NotFound, "variable `" + llvm::Twine(name) + "`: clGetDeviceGlobalVariablePointerINTEL on "
                                         "OpenCL device " + device_ + " failed: " + errorName(err));
  return std::pair(pointer, size);
}

llvm::Expected<cl_command_queue> Program::copyQueue(cl_context &context) const {
  cl_int err = api_.clGetProgramInfo(program_, CL_PROGRAM_CONTEXT, sizeof context, &context, nullptr);
  cl_command_queue queue =
      err == CL_SUCCESS ? api_.clCreateCommandQueueWithProperties(context, id_, nullptr, &err) : nullptr;
  if (err != CL_SUCCESS)
    return clFailure("a command queue for a variable's copy: clCreateCommandQueueWithProperties", err);
  return queue;
}

llvm::Expected<Extent> Program::variable(std::string_view name) {
  if (const VariableLayout::Variable *placed = variables_ ? variables_->find(name) : nullptr)
    return Extent{variables_->data(*placed), placed->size};
  if (pointers_.clGetDeviceGlobalVariablePointerINTEL) {
    auto address = driverAddress(name);
    if (!address) return address.takeError();
    return Extent{address->first, address->second};
  }
  return fail(ErrorCode::Unsupported, "`" + llvm::Twine(name) + "` is a device variable: OpenCL device " + device_ +
                                          " gives no device addresses of program variables" +
                                          (variables_ ? " (devdl placed this program's other variables in host "
                                                        "memory; this one's initializer holds an address it cannot)"
                                                      : ""));
}

llvm::Error Program::copyVariable(std::string_view name, size_t offset, void *host, size_t size, bool toDevice) {
  if (const VariableLayout::Variable *placed = variables_ ? variables_->find(name) : nullptr) {
    if (llvm::Error err = checkInsideVariable(name, placed->size, offset, size)) return err;
    char *there = variables_->data(*placed) + offset;
    std::memcpy(toDevice ? there : host, toDevice ? host : there, size);
    return llvm::Error::success();
  }
  if (pointers_.clGetDeviceGlobalVariablePointerINTEL) return copyAtDriverAddress(name, offset, host, size, toDevice);
  return copyThroughKernel(name, offset, host, size, toDevice);
}

llvm::Error Program::copyAtDriverAddress(std::string_view name, size_t offset, void *host, size_t size,
                                         bool toDevice) {
  auto address = driverAddress(name);
  if (!address) return address.takeError();
  if (llvm::Error err = checkInsideVariable(name, address->second, offset, size)) return err;
  cl_context context = nullptr;
  auto queue = copyQueue(context);
  if (!queue) return queue.takeError();
  char *there = static_cast<char *>(address->first) + offset;
  const cl_int err = pointers_.clEnqueueMemcpyINTEL(*queue, CL_TRUE, toDevice ? there : host, toDevice ? host : there,
                                                     size, 0, nullptr, nullptr);
  api_.clReleaseCommandQueue(*queue);
  if (err != CL_SUCCESS)
    return fail(ErrorCode::Unsupported, "variable `" + llvm::Twine(name) + "` on OpenCL device " + device_ +
                                            ": clEnqueueMemcpyINTEL failed: " + errorName(err));
  return llvm::Error::success();
}

llvm::Error Program::copyThroughKernel(std::string_view name, size_t offset, void *host, size_t size, bool toDevice) {
  // Through the copy kernel devdl linked into the program (copyKernels): an object of its own
  // each time, since the arguments of a kernel object are shared by whoever sets them.
  cl_int err = CL_SUCCESS;
  cl_kernel kernel = api_.clCreateKernel(program_, copyKernelName(name).c_str(), &err);
  if (err != CL_SUCCESS)
    return fail(ErrorCode::Unsupported, "`" + llvm::Twine(name) + "` is a device variable: OpenCL device " + device_ +
                                            " gives no device addresses of program variables, and its program has no "
                                            "copy kernel of devdl's for it (" + errorName(err) + ")");
  cl_context context = nullptr;
  auto queue = copyQueue(context);
  if (!queue) {
    api_.clReleaseKernel(kernel);
    return queue.takeError();
  }
  std::string staging(8 + size, '\0');
  if (toDevice) std::memcpy(staging.data() + 8, host, size);
  cl_mem buffer = api_.clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, staging.size(),
                                      staging.data(), &err);
  const cl_ulong at = offset, count = size;
  const cl_int in = toDevice;
  const size_t one = 1;
  const char *step = "clCreateBuffer";
  if (err == CL_SUCCESS) {
    step = "clSetKernelArg";
    if ((err = api_.clSetKernelArg(kernel, 0, sizeof buffer, &buffer)) == CL_SUCCESS &&
        (err = api_.clSetKernelArg(kernel, 1, sizeof at, &at)) == CL_SUCCESS &&
        (err = api_.clSetKernelArg(kernel, 2, sizeof count, &count)) == CL_SUCCESS &&
        (err = api_.clSetKernelArg(kernel, 3, sizeof in, &in)) == CL_SUCCESS) {
      step = "clEnqueueNDRangeKernel";
      if ((err = api_.clEnqueueNDRangeKernel(*queue, kernel, 1, nullptr, &one, &one, 0, nullptr, nullptr)) ==
          CL_SUCCESS) {
        step = "clEnqueueReadBuffer";
        err = api_.clEnqueueReadBuffer(*queue, buffer, CL_TRUE, 0, toDevice ? 8 : staging.size(), staging.data(), 0,
                                       nullptr, nullptr);
      }
    }
  }
  api_.clReleaseCommandQueue(*queue);
  if (buffer) api_.clReleaseMemObject(buffer);
  api_.clReleaseKernel(kernel);
  if (err != CL_SUCCESS)
    return fail(ErrorCode::Unsupported, "variable `" + llvm::Twine(name) + "` on OpenCL device " + device_ + ": " + step +
                                            " failed: " + errorName(err));
  uint64_t bytes = 0;
  std::memcpy(&bytes, staging.data(), sizeof bytes);
  if (llvm::Error err = checkInsideVariable(name, bytes, offset, size)) return err;
  if (!toDevice) std::memcpy(host, staging.data() + 8, size);
  return llvm::Error::success();
}

llvm::Expected<void *> Program::function(std::string_view name) {
  return fail(ErrorCode::Unsupported, "`" + llvm::Twine(name) + "` is a device function: OpenCL device " + device_ +
                                          " gives no device function pointers");
}

ProgramOfParts::ProgramOfParts(std::vector<std::unique_ptr<opencl::Program>> parts, std::vector<std::vector<std::string>> names)
    : parts_(std::move(parts)), names_(std::move(names)) {
  for (size_t i = 0; i < names_.size(); ++i)
    for (const std::string &name : names_[i]) owner_.try_emplace(name, i);
}

Program &ProgramOfParts::partOf(std::string_view name) const {
  auto it = owner_.find(name);
  return *parts_[it == owner_.end() ? 0 : it->second];
}

}  // namespace devdl::backend::opencl
