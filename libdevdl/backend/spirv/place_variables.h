// A translated program's variables moved into one region of host memory, for a CPU device that
// builds each kernel of a program apart, each with its own copy of the program's variables
// (PoCL): every kernel then addresses the one region, which the host reads and writes. The
// layout is what the backend keeps of it (backend/opencl/host_variables.h), and stores with the
// program's binary.
#pragma once

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/Support/Error.h>

#include <cstdint>
#include <string>
#include <vector>

namespace llvm {
class Module;
}

namespace devdl::backend {

/// A linked program's variables moved into one region of host memory: where each lies, and what
/// the region holds before any kernel runs.
struct VariableLayout {
  struct Variable {
    std::string name;
    uint64_t offset = 0, size = 0;
  };
  /// Where the region holds the address of a place in it: at offset `at`, the region's address
  /// plus `addend` (as ELF's R_X86_64_RELATIVE).
  struct Relocation {
    uint64_t at = 0, addend = 0;
  };
  uint64_t size = 0;                    // the region's bytes
  std::vector<Variable> variables;      // those with a name
  std::string initial;                  // the region's first bytes, as the initializers give them; the rest is zero
  std::vector<Relocation> relocations;  // applied over `initial` once the region's address is known
};

/// The most bytes of variables placeVariables moves to host memory, and a stored program may name:
/// bounded, since what they start as is made in memory (a program with more keeps them all).
inline constexpr uint64_t kMaxRegion = uint64_t(64) << 20;

/// Where a region of `layout.size` bytes for the variables is, in host memory; or why there is none.
using PlaceVariables = llvm::function_ref<llvm::Expected<uint64_t>(const VariableLayout &)>;

/// Moves the module's variables in the global address space into one region of host memory that
/// `place` gives: each use addresses the region instead, so kernels built apart share them. A
/// variable whose initializer holds an address the region cannot (a function's, or a variable's
/// that stays) stays. Only in builds with the translator (spirvToSpir calls it on what the
/// translator made).
llvm::Error placeVariables(llvm::Module &module, PlaceVariables place);

}  // namespace devdl::backend
