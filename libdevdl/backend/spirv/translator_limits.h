// What the SPIRV-LLVM-Translator (15) cannot take: modules the SPIR-V validator accepts and the
// translator ends the process on (exit, assertion, crash), refused before it is called. Its own
// file since the list grows with each find of the fuzzers, and each caller of the translator
// (devdl's OpenCL backend per image, the translation of a linked module, the tests' drivers)
// asks it first.
#pragma once

#include <llvm/Support/Error.h>

#include <cstdint>
#include <span>
#include <vector>

namespace devdl::backend {

/// Whether the translator takes `words` without ending the process, where the SPIR-V validator
/// lets through what it exits, asserts or crashes on (a version or an extension it does not know,
/// an alignment not a power of 2, a function with fewer parameters than its type, a builtin
/// variable used other than loaded, a specialization constant's operation it folds unchecked, and
/// more: TranslatorLimits in spirv/translator_limits.cpp has each, tests/data/fuzz-regressions an
/// input for each). An error says which. Success in a build without the translator
/// (DEVDL_PORTABLE), which translates nothing.
llvm::Error checkTranslatable(std::span<const uint32_t> words);

/// `words` without what the translator's reader asserts on and a module may go without: a
/// parameter's hint that its memory is neither read nor written (FuncParamAttr NoReadWrite),
/// for which the translator's table has no LLVM attribute. Dropped, as a hint may be, by every
/// reader of SPIR-V into LLVM (spirv/translator.h, spirv/translator_command.h).
std::vector<uint32_t> withoutUnreadableHints(std::span<const uint32_t> words);

}  // namespace devdl::backend
