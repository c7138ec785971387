// Programs built on an OpenCL device (ProgramBuilder): from one SPIR-V module as IL, from SPIR,
// from a binary (a native object, a stored program); and the binary a linked program is stored
// as, and loaded from, in the disk cache.
#pragma once

#include "backend/backend.h"
#include "backend/opencl/device_info.h"
#include "backend/opencl/opencl_api.h"
#include "backend/opencl/opencl_program.h"
#include "support/bytes.h"

#include <llvm/Support/Error.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace devdl::backend::opencl {

/// The most kernels a program built from SPIR on a device that compiles each kernel at its first
/// launch (PoCL) is stored with the driver's binary for: asking for it compiles every kernel (some
/// 40 ms each here, 40 s for 1,000), so past this the SPIR is stored (kStoredSpir).
inline constexpr size_t kKernelsForDriverBinary = 16;

/// Programs built on an OpenCL device: from one SPIR-V module as IL, from SPIR, from a binary (a
/// native object, a stored program); and the binary a linked program is stored as, and loaded
/// from, in the disk cache.
class ProgramBuilder {
 public:
  explicit ProgramBuilder(const DeviceInfo &device) : device_(device) {}

  /// Builds SPIR 1.2 bitcode; a failed build's error carries the build log.
  llvm::Expected<std::unique_ptr<Program>> buildSpir(std::string_view bitcode, std::string_view options = {}) const;
  /// Builds one (linked) SPIR-V module as IL, its specialization constants set.
  llvm::Expected<std::unique_ptr<Program>> buildIl(std::span<const uint32_t> words, const SpecConstants &specs = {}) const;
  /// clCreateProgramWithBinary and clBuildProgram with `options`; `what` the binary is, for
  /// errors ("SPIR", "a cached program"), which carry the build log.
  llvm::Expected<std::unique_ptr<Program>> buildBinary(std::string_view binary, const std::string &options,
                                                       std::string_view what) const;
  /// A native binary as this device's compiled object, or why the device does not take it (no
  /// linker, or the driver refuses the binary).
  llvm::Expected<std::unique_ptr<Program>> nativeObject(Bytes binary) const;
  /// Sets specialization constants of an IL program (clSetProgramSpecializationConstant).
  llvm::Error specialize(cl_program program, const SpecConstants &specs) const;
  /// `program`, owned, with what this device gives its variables.
  std::unique_ptr<Program> own(cl_program program) const;

  /// The driver's binary of one program, or why there is none.
  llvm::Expected<std::string> driverBinary(const Program &program) const;
  /// The linked program's binary, for the disk cache; empty, saying why under
  /// DEVDL_DEBUG=statistics, where the driver cannot give it (or cannot without ending the process).
  /// `spir`: the bitcode it was built from, on the SPIR path; on a device that compiles each kernel
  /// at its first launch, that is stored instead where the driver's binary would compile more than
  /// kKernelsForDriverBinary kernels, or cannot be made.
  std::string binaryOf(const backend::Program &program, std::string_view spir = {}) const;
  /// clCreateProgramWithBinary and clBuildProgram of a binary binaryOf gave.
  llvm::Expected<std::unique_ptr<backend::Program>> load(std::string_view binary) const;

 private:
  /// The programs of a stored program of parts, built.
  llvm::Expected<std::unique_ptr<backend::Program>> loadParts(std::string_view packed) const;
  /// clCreateProgramWithBinary, checked (the binary's status too).
  llvm::Expected<std::unique_ptr<Program>> fromBinary(Bytes binary) const;

  const DeviceInfo &device_;
};

}  // namespace devdl::backend::opencl
