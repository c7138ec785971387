// The layout of a SPIR-V function's blocks. SPIR-V asks that each block come after the blocks that
// dominate it, that a block's one merge instruction come just before its branch, and that merge
// instructions describe structured control flow: rules of layout and of structure, not of
// meaning, in a Kernel module, where a merge instruction only carries loop controls (unrolling
// hints). The SPIRV-LLVM-Translator 15 breaks them where clang-15 -O1 marks loops not to be
// unrolled (most loops): it lays out the exit block it adds before the latch that dominates it,
// writes a one-block loop's OpLoopMerge before the compare its branch takes, writes one merge up
// to four times, and, in nested loops and switches, merges no structure has. Drivers take such a
// module (Intel's OpenCL runtime does); the validator does not, and devdl reads only what the
// validator vouches for.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace devdl::readers {

/// What becomes of a block's merge instructions as its function is laid out again.
enum class MergeInstructions {
  Kept,     // the last of them (the translator writes one up to four times over) just before the branch
  Dropped,  // all: in a Kernel module they carry only loop controls; nullopt for a Shader module
};

/// `words` laid out as SPIR-V asks: each function's blocks in reverse post-order of its control
/// flow from the entry block (branch targets first, then merge and continue targets), so that a
/// block comes after each block that dominates it, blocks no branch reaches following in their
/// order, and its merge instructions as `merges` says. Nullopt where that changes nothing, or the
/// module does not parse.
std::optional<std::vector<uint32_t>> inLayoutOrder(std::span<const uint32_t> words, MergeInstructions merges);

}  // namespace devdl::readers
