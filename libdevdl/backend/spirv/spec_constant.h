// A specialization constant as the translation carries it: from the translation's callers to the
// translator, in this process, through the machine's llvm-spirv-15 or over the helper's protocol.
#pragma once

#include <cstdint>
#include <utility>

namespace devdl::backend {

/// A specialization constant: SpecId and value.
using SpecConstant = std::pair<uint32_t, uint64_t>;

}  // namespace devdl::backend
