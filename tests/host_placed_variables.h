// The tests' drivers (test doubles over PoCL: tests/level_zero_driver, tests/opencl_layer) keep a
// program's variables as a device keeps them, one instance for all its kernels, by devdl's own
// placement (backend/spirv_link.h): PoCL 3.1 gives each kernel a copy of its own.
#pragma once

#include "backend/spirv_link.h"

#include <llvm/Support/Error.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <system_error>
#include <utility>

namespace devdl::test {

/// Host memory holding a program's variables, freed with this object.
struct HostPlacedVariables {
  char *region = nullptr;
  std::map<std::string, std::pair<void *, size_t>> addresses;  // where each named variable is, and its size
  HostPlacedVariables() = default;
  HostPlacedVariables(const HostPlacedVariables &) = delete;
  HostPlacedVariables &operator=(const HostPlacedVariables &) = delete;
  ~HostPlacedVariables() { std::free(region); }

  /// Allocates the region `layout` asks for, initialized and relocated, and answers its address:
  /// a PlaceVariables for spirvToSpir. Once only.
  llvm::Expected<uint64_t> place(const backend::VariableLayout &layout) {
    const size_t bytes = (layout.size + 4095) / 4096 * 4096;
    region = static_cast<char *>(std::aligned_alloc(4096, bytes));
    if (!region) return llvm::createStringError(std::errc::not_enough_memory, "no host memory for the variables");
    std::memset(region, 0, bytes);
    std::memcpy(region, layout.initial.data(), layout.initial.size());
    for (const auto &relocation : layout.relocations) {
      const uint64_t value = reinterpret_cast<uint64_t>(region) + relocation.addend;
      std::memcpy(region + relocation.at, &value, sizeof value);
    }
    for (const auto &variable : layout.variables)
      addresses[variable.name] = {region + variable.offset, variable.size};
    return reinterpret_cast<uint64_t>(region);
  }
};

}  // namespace devdl::test
