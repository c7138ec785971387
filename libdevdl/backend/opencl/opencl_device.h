// An OpenCL device devdl links for: what it can consume (capability detection, never vendor
// names) and building programs on it.
#pragma once

#include "backend/opencl/opencl_api.h"

#include <llvm/Support/Error.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace devdl::backend::opencl {

/// What a device can take, read from its info queries.
struct Capabilities {
  bool spirvIl = false;  // CL_DEVICE_IL_VERSION lists SPIR-V: clCreateProgramWithIL
  bool spir = false;     // cl_khr_spir: SPIR 1.2 bitcode through clCreateProgramWithBinary("-x spir")
  bool linker = false;   // CL_DEVICE_LINKER_AVAILABLE: clCompileProgram / clLinkProgram
};

/// A built program; released with this object.
class Program {
 public:
  Program(const Api &api, cl_program program) : api_(&api), program_(program) {}
  Program(Program &&other) noexcept : api_(other.api_), program_(std::exchange(other.program_, nullptr)) {}
  Program &operator=(Program &&) = delete;
  ~Program() {
    if (program_) api_->clReleaseProgram(program_);
  }
  cl_program get() const { return program_; }
  const Api &api() const { return *api_; }

  /// A new kernel object (the caller releases it), or an error naming the kernel.
  llvm::Expected<cl_kernel> createKernel(std::string_view name) const;

 private:
  const Api *api_;
  cl_program program_;
};

class Device {
 public:
  /// The first device, over all platforms, that has a compiler, or the one DEVDL_DEVICE names
  /// (its index among those devices, or a part of its name); its own new context.
  static llvm::Expected<std::unique_ptr<Device>> openDefault();
  /// The program's own device and context (retained while this object lives).
  static llvm::Expected<std::unique_ptr<Device>> attach(cl_device_id device, cl_context context);
  ~Device();

  const Api &api() const { return api_; }
  cl_platform_id platform() const { return platform_; }
  cl_device_id id() const { return device_; }
  cl_context context() const { return context_; }
  const std::string &name() const { return name_; }
  const Capabilities &capabilities() const { return caps_; }

  /// Builds SPIR 1.2 bitcode; a failed build's error carries the build log.
  llvm::Expected<Program> buildSpir(std::string_view bitcode, std::string_view options = {}) const;

 private:
  Device(const Api &api, cl_platform_id platform, cl_device_id device, cl_context context);

  const Api &api_;
  cl_platform_id platform_;
  cl_device_id device_;
  cl_context context_;
  std::string name_;
  Capabilities caps_;
};

}  // namespace devdl::backend::opencl
