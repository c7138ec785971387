// A program built on an OpenCL device (Program): its kernels, and its variables as the host
// reaches them; and a program linked in parts, each name answered by the part that holds it
// (ProgramOfParts).
#pragma once

#include "backend/backend.h"
#include "backend/kernel_table.h"
#include "backend/opencl/host_variables.h"
#include "backend/opencl/opencl_api.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/Support/Error.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace devdl::backend::opencl {

/// A built program, and the kernels made from it; released with this object.
class Program final : public backend::Program {
 public:
  /// `pointers`: where the device has Intel's variable pointers (Capabilities), else none.
  Program(const Api &api, cl_program program, std::string device, cl_device_id id, VariablePointers pointers = {})
      : api_(api),
        program_(program),
        device_(std::move(device)),
        id_(id),
        pointers_(pointers),
        kernels_([&api](cl_kernel kernel) { api.clReleaseKernel(kernel); }) {}
  Program(const Program &) = delete;
  Program &operator=(const Program &) = delete;
  ~Program() override;
  cl_program get() const { return program_; }

  /// The variables its kernels address in host memory, kept while it lives.
  void holdVariables(std::unique_ptr<HostVariables> variables) { variables_ = std::move(variables); }
  const HostVariables *hostVariables() const { return variables_.get(); }

  /// The calling thread's cl_kernel, made on its first request and kept until it ends (a
  /// cl_kernel holds its arguments: each thread sets its own); an error naming the kernel.
  llvm::Expected<void *> kernel(std::string_view name) override;
  /// Its address in host memory, where devdl placed it there; else the driver's device address,
  /// where it gives those (clGetDeviceGlobalVariablePointerINTEL); else an error.
  llvm::Expected<Extent> variable(std::string_view name) override;
  llvm::Expected<void *> function(std::string_view name) override;
  /// Directly in host memory, where devdl placed it there; else at the driver's address with
  /// clEnqueueMemcpyINTEL, where it gives one; else through devdl's copy kernel linked into the
  /// program (copyKernels).
  llvm::Error copyVariable(std::string_view name, size_t offset, void *host, size_t size, bool toDevice) override;

 private:
  /// The driver's address and size of a variable (clGetDeviceGlobalVariablePointerINTEL).
  llvm::Expected<std::pair<void *, size_t>> driverAddress(std::string_view name) const;
  /// A command queue of the program's context (`context`) on its device, for a copy; the caller
  /// releases it.
  llvm::Expected<cl_command_queue> copyQueue(cl_context &context) const;
  /// copyVariable's ways to a variable the program does not hold in host memory: at the driver's
  /// address, copied as USM; through devdl's copy kernel linked into the program.
  llvm::Error copyAtDriverAddress(std::string_view name, size_t offset, void *host, size_t size, bool toDevice);
  llvm::Error copyThroughKernel(std::string_view name, size_t offset, void *host, size_t size, bool toDevice);

  const Api &api_;
  cl_program program_;
  std::string device_;
  cl_device_id id_;
  VariablePointers pointers_;  // the driver's, where it gives variables' addresses
  ThreadKernelTable<cl_kernel> kernels_;
  std::unique_ptr<HostVariables> variables_;  // unmapped after the program is released
};

/// A program linked in parts (backend/partition.h), each built as a program of its own in a helper
/// process of its own (Linker::linkParts): each kernel and variable is the one of the part that
/// holds it, which is the one its kernels use. A name no part holds is asked of the first part.
class ProgramOfParts final : public backend::Program {
 public:
  /// `names[i]`: the kernels and variables part `parts[i]` answers for.
  ProgramOfParts(std::vector<std::unique_ptr<opencl::Program>> parts, std::vector<std::vector<std::string>> names);
  const std::vector<std::unique_ptr<opencl::Program>> &parts() const { return parts_; }
  const std::vector<std::vector<std::string>> &names() const { return names_; }

  llvm::Expected<void *> kernel(std::string_view name) override { return partOf(name).kernel(name); }
  llvm::Expected<Extent> variable(std::string_view name) override { return partOf(name).variable(name); }
  llvm::Expected<void *> function(std::string_view name) override { return partOf(name).function(name); }
  llvm::Error copyVariable(std::string_view name, size_t offset, void *host, size_t size, bool toDevice) override {
    return partOf(name).copyVariable(name, offset, host, size, toDevice);
  }

 private:
  opencl::Program &partOf(std::string_view name) const;
  std::vector<std::unique_ptr<opencl::Program>> parts_;
  std::vector<std::vector<std::string>> names_;
  llvm::StringMap<size_t> owner_;
};

}  // namespace devdl::backend::opencl
