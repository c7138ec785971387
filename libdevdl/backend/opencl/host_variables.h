// A program's variables in host memory, for CPU devices that build each kernel of a program apart
// (PoCL makes a library of each, with a copy of its own of every program variable): spirvToSpir
// points all the kernels at one region, which the host reads and writes directly. And the binary
// devdl's OpenCL backend stores for a program: the driver's, after what the region needs.
#pragma once

#include "backend/spirv/place_variables.h"

#include <llvm/Support/Error.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace devdl::backend::opencl {

/// A region of host memory holding a program's variables, laid out as `layout` says and initialized
/// as it says; unmapped with this object.
class HostVariables {
 public:
  /// A region at an address that depends only on `seed` where one of those is free, so that a
  /// program gets the same address, hence the same bitcode and binary, in every process; else
  /// anywhere. An error only where no memory can be mapped.
  static llvm::Expected<std::unique_ptr<HostVariables>> place(VariableLayout layout, uint64_t seed);
  /// The region at exactly `address` (a stored program's), or an error: ErrorCode::Busy where
  /// something of this process lies there.
  static llvm::Expected<std::unique_ptr<HostVariables>> at(VariableLayout layout, uint64_t address);
  HostVariables(const HostVariables &) = delete;
  HostVariables &operator=(const HostVariables &) = delete;
  ~HostVariables();

  uint64_t address() const { return reinterpret_cast<uint64_t>(base_); }
  const VariableLayout &layout() const { return layout_; }
  /// The variable the program exports as `name`, or null.
  const VariableLayout::Variable *find(std::string_view name) const;
  char *data(const VariableLayout::Variable &variable) const { return static_cast<char *>(base_) + variable.offset; }

 private:
  HostVariables(VariableLayout layout, void *base, size_t mapped);
  void initialize();
  VariableLayout layout_;
  void *base_;
  size_t mapped_;
};

/// The version of storedProgram's format, part of the device's identity.
inline constexpr uint32_t kStoredProgramVersion = 2;

/// What load() takes back: the driver's binary, and the host variables it addresses.
struct StoredProgram {
  std::optional<std::pair<uint64_t, VariableLayout>> variables;  // address and layout, where it has some
  std::string_view driverBinary;
};

/// What a program built from SPIR on a device that compiles each kernel at its first launch
/// (PoCL) stores, where the driver's binary would cost compiling every kernel: this, then the SPIR
/// bitcode, built again on load (the driver keeps what it compiles in a cache of its own).
inline constexpr std::string_view kStoredSpir = "devdl SPIR 1.2\n";

/// What a program linked in parts stores as the driver's binary (backend/packed_parts.h): each
/// part's CL_PROGRAM_BINARIES and the names it answers for.
inline constexpr std::string_view kPackedPrograms = "devdl OpenCL programs\n";

/// The binary devdl stores for a program: a header with its host variables (none on most
/// devices), then the driver's binary (docs/cache-format.md).
std::string storedProgram(const HostVariables *variables, std::string_view driverBinary);
/// A binary storedProgram made; an error saying what is wrong with it otherwise.
llvm::Expected<StoredProgram> readStoredProgram(std::string_view binary);

}  // namespace devdl::backend::opencl
