// SPIR-V read into LLVM IR by the machine's llvm-spirv-15, where this build has no
// SPIRV-LLVM-Translator of its own (DEVDL_PORTABLE: the GPU machine's stage, the wheel). Debian
// ships the translator only as a library built on its libLLVM-15.so, which a self-contained build
// cannot carry; its command (package llvm-spirv-15, on the same LLVM 15 as PoCL 3) is on the
// machines whose devices take SPIR but not SPIR-V. It runs in a process of its own, as
// devdl-translate does, so that a module it ends its process on ends only that one, bounded by
// DEVDL_TRANSLATOR_TIMEOUT; what devdl does to the module after (spirv/translation.h) is done
// here, with the LLVM linked into devdl.
#pragma once

#include "backend/spirv/spec_constant.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/Error.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace devdl::backend {

/// The command: DEVDL_LLVM_SPIRV names it (empty: none), else llvm-spirv-15 on PATH (in a
/// secure-execution process, which reads neither, /usr/bin/llvm-spirv-15). Looked up once.
const std::optional<std::string> &translatorCommand();

/// `words` with each specialization constant's default value set to the value given for its
/// SpecId: the module as specialized, for a translator told no values.
std::vector<uint32_t> withSpecConstantDefaults(std::span<const uint32_t> words,
                                               std::span<const SpecConstant> specConstants);

/// The module, specialized, as `command` (translatorCommand()'s) reads it into `context` (OpenCL
/// 1.2 builtins) and LLVM's verifier passes it. The command runs as a helper process
/// (support/helper_process.h): one that fails, runs past DEVDL_TRANSLATOR_TIMEOUT or writes no
/// bitcode is an error saying so, with what it printed last.
llvm::Expected<std::unique_ptr<llvm::Module>> readByCommand(const std::string &command, llvm::LLVMContext &context,
                                                            std::span<const uint32_t> words,
                                                            std::span<const SpecConstant> specConstants);

}  // namespace devdl::backend
