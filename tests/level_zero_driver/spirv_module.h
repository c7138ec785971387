// What the test driver reads of a SPIR-V module, as a Level Zero driver's compiler would: its
// kernels, the functions and variables it exports and imports, and its specialization constants.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace zetest {

/// How a kernel's parameter is set: a value, a buffer (global or constant memory), or the size
/// of a local buffer.
enum class ArgKind { Value, Buffer, Local };

struct Linkage {
  std::set<std::string> kernels;
  std::map<std::string, std::vector<ArgKind>> kernelArgs;
  std::set<std::string> exportedFunctions;
  std::set<std::string> exportedVariables;
  std::set<std::string> imports;
};

/// Reads the linkage of a SPIR-V module; "" or why the words are not one.
std::string readLinkage(std::span<const uint32_t> words, Linkage *out);

/// Makes the given values the defaults of the module's specialization constants (SpecId -> the
/// value, as many bytes as the constant's type is wide: 1 for a bool), so that whatever links the
/// module later links those values. "" or why not (a SpecId the module does not declare).
std::string applySpecConstants(std::vector<uint32_t> &words, const std::map<uint32_t, const void *> &values);

}  // namespace zetest
