// What an image's code refers to: each kernel, function and variable it defines, and the names
// its code or initializer uses. A link may split a program along this graph
// (backend/partition.h): kernels that reach no common variable can be compiled apart.
#pragma once

#include "image/device_image.h"
#include "support/bytes.h"

#include <llvm/Support/Error.h>

#include <cstdint>
#include <string>
#include <vector>

namespace devdl {

struct CodeGraph {
  struct Definition {
    std::string name;
    SymbolKind kind;  // Kernel, Function or Variable; local ones too
    uint64_t size;    // bytes of its text: the work its compilation is
    std::vector<std::string> calls;  // the functions its code calls by name
    // Every other name it uses: variables, and functions whose address it takes.
    std::vector<std::string> refers;
  };
  std::vector<Definition> definitions;
};

namespace readers {

/// The graph of a PTX module's definitions. Names are kept as written; names of registers,
/// labels and parameters come along in `refers` (they match no definition). Fails with
/// BadFormat where the text does not parse as readPtx reads it.
llvm::Expected<CodeGraph> ptxCodeGraph(Bytes ptx);

/// The graph of a SPIR-V module's definitions: kernels by their entry points' names (llvm-spirv's
/// entry-point wrapper and the exported body of the same name are one kernel), functions and
/// variables by their linkage names, and what has none by a name of its id and the module's hash,
/// which no other module's definition has. Only writable program-scope variables (CrossWorkgroup,
/// Generic storage) are variables here: built-ins, work-group memory and constants, whose copies
/// no kernel can tell apart, are its code's own. Fails with BadFormat where the module is not in
/// this host's byte order or SPIRV-Tools cannot parse it.
llvm::Expected<CodeGraph> spirvCodeGraph(Bytes spirv);

}  // namespace readers

}  // namespace devdl
