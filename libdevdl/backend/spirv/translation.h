// A linked SPIR-V module translated into LLVM by the SPIRV-LLVM-Translator, for devices that take
// SPIR but not SPIR-V (PoCL 3), and optimized across the images it was linked from (load-time
// LTO): written as SPIR 1.2 bitcode for clBuildProgram("-x spir"), or back as SPIR-V for devices
// that take IL. The translator runs in a helper process (spirv/translator_process.h); the
// functions in inProcess are what the helper runs. Without the translator (DEVDL_PORTABLE),
// spirvToSpir reads the module with the machine's llvm-spirv-15 (spirv/translator_command.h) and
// does not optimize; optimizeSpirv fails, saying so.
#pragma once

#include "backend/spirv/place_variables.h"
#include "backend/spirv/spec_constant.h"

#include <llvm/Support/Error.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace devdl::backend {

/// Whether this build has the SPIRV-LLVM-Translator and its helper, devdl-translate (not the
/// portable one): what load-time LTO and programs built in parts need.
bool hasTranslatorHelper();

/// Whether spirvToSpir can translate here: with the build's translator, else with the machine's
/// llvm-spirv-15 (spirv/translator_command.h).
bool canTranslateToSpir();

/// What the tools' --version says of it: which devices this build's SPIR-V reaches, and how.
std::string spirTranslationStatement();

/// Translates a SPIR-V module into SPIR 1.2 bitcode (OpenCL 1.2 builtins), specializing it;
/// refused first where checkTranslatable refuses it. With `place` (a CPU device whose kernels are
/// built apart, each with its own copy of the program's variables: PoCL), every variable in the
/// global address space moves to the region `place` gives, which every kernel then addresses,
/// but those whose initializers hold an address outside it (a function's): they stay. With `optimize` (load-time LTO of a linked
/// program), every function but the kernels is made internal and LLVM's -O2 pipeline runs over
/// the module: what the images call of each other is inlined.
llvm::Expected<std::string> spirvToSpir(std::span<const uint32_t> words,
                                        std::span<const SpecConstant> specConstants = {}, bool optimize = false,
                                        PlaceVariables place = nullptr);

/// The linked module optimized across its former images for a device that takes SPIR-V IL, as
/// spirvToSpir optimizes it, through LLVM: SPIRV-Tools' optimizer does not inline in OpenCL
/// (Kernel) modules. The constants are applied (none is left to set) and the result is written
/// back within the module's SPIR-V version and extensions, and validated. Fails, leaving the
/// module to be used as linked, where the translator cannot write back what LLVM made.
llvm::Expected<std::vector<uint32_t>> optimizeSpirv(std::span<const uint32_t> words,
                                                    std::span<const SpecConstant> specConstants = {});

/// The same, in this process: what devdl-translate runs, and the fuzzers, which look for what
/// ends a process. Only in builds with the translator.
namespace inProcess {
llvm::Expected<std::string> spirvToSpir(std::span<const uint32_t> words, std::span<const SpecConstant> specConstants = {},
                                        bool optimize = false, PlaceVariables place = nullptr);
llvm::Expected<std::vector<uint32_t>> optimizeSpirv(std::span<const uint32_t> words,
                                                    std::span<const SpecConstant> specConstants = {});
}  // namespace inProcess

}  // namespace devdl::backend
