// The SPIRV-LLVM-Translator as devdl calls it, for the translation (spirv/translation.h) and the
// copy kernels (spirv/copy_kernels.h) alike: one call at a time, a module read only once
// checkTranslatable lets it through and checked as LLVM IR, and written back as SPIR-V within
// what the module it came from has, and validated. Only in builds with the translator (not
// DEVDL_PORTABLE): its includers include it under DEVDL_HAVE_SPIRV_TRANSLATOR.
#pragma once

#include "backend/spirv/spec_constant.h"

#include <LLVMSPIRVLib/LLVMSPIRVLib.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/Error.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace devdl::backend {

/// The translator is not thread-safe (lazily built tables, LLVM's global options): one
/// translation at a time, either way, as intel/opencl-clang guards it. The devices' builds still
/// overlap.
extern std::mutex translatorMutex;

/// `words` as LLVM IR, specialized, with the builtins as `builtins` says; refused first where
/// checkTranslatable refuses it, and where the translator makes invalid IR (LLVM's passes assume
/// valid IR). The caller holds `translatorMutex`.
llvm::Expected<std::unique_ptr<llvm::Module>> readModule(llvm::LLVMContext &context, std::span<const uint32_t> words,
                                                         std::span<const SpecConstant> specConstants,
                                                         SPIRV::BIsRepresentation builtins);

/// `module` written as SPIR-V within what `like` has: its version and the extensions it declares.
/// `what` names the module in errors. The caller holds `translatorMutex`.
llvm::Expected<std::string> writeSpirvLike(llvm::Module &module, std::span<const uint32_t> like, const char *what);

/// The words of SPIR-V the translator wrote, which must validate.
llvm::Expected<std::vector<uint32_t>> validSpirv(const std::string &written, const char *what);

}  // namespace devdl::backend
