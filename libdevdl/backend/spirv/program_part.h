// A SPIR-V image cut down to one part of a program's kernels (backend/partition.h), for a driver
// that compiles and links each part as a program of its own, in a process of its own: the entry
// points of other parts' kernels go, the definitions other parts export (their kernels' bodies,
// their variables) become the image's own, and SPIRV-Tools drops what nothing left reaches, so
// that the driver compiles only this part's code and the part holds only its own variables.
#pragma once

#include "backend/partition.h"

#include <llvm/ADT/StringSet.h>
#include <llvm/Support/Error.h>

#include <cstdint>
#include <span>
#include <vector>

namespace devdl::backend {

/// `words` (a module of the program, in this host's byte order) with only what part `part` of
/// `parts` needs. A kernel or variable no part names stays as it is; so does the export of a
/// kernel's body that `imported` names (another image calls it as a function). Fails where
/// SPIRV-Tools cannot read the module.
llvm::Expected<std::vector<uint32_t>> spirvForPart(std::span<const uint32_t> words, std::span<const ProgramPart> parts,
                                                   size_t part, const llvm::StringSet<> &imported);

}  // namespace devdl::backend
