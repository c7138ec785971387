// The SPIRV-LLVM-Translator as devdl calls it (spirv/translator.h): its lock, a module read into
// LLVM IR past the translator's limits, and LLVM IR written back as SPIR-V and validated. Built
// empty without the translator (DEVDL_PORTABLE).
#if DEVDL_HAVE_SPIRV_TRANSLATOR
#include "backend/spirv/translator.h"
#include "backend/spirv/translator_limits.h"
#include "backend/spirv/words.h"
#include "support/error.h"
#include "support/spirv_tools.h"

#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>
#include <spirv-tools/libspirv.h>
#include <spirv/unified1/spirv.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>
#include <string_view>

namespace devdl::backend {

std::mutex translatorMutex;

llvm::Expected<std::unique_ptr<llvm::Module>> readModule(llvm::LLVMContext &context, std::span<const uint32_t> words,
                                                         std::span<const SpecConstant> specConstants,
                                                         SPIRV::BIsRepresentation builtins) {
  const std::vector<uint32_t> translated = withoutUnreadableHints(words);
  if (llvm::Error err = checkTranslatable(translated))
    return fail(ErrorCode::Unsupported, "linked SPIR-V: " + llvm::toString(std::move(err)));
  SPIRV::TranslatorOpts options;
  options.enableAllExtensions();
  options.setDesiredBIsRepresentation(builtins);
  for (const auto &[id, value] : specConstants) options.setSpecConst(id, value);
  std::istringstream in(std::string(reinterpret_cast<const char *>(translated.data()), translated.size() * 4));
  llvm::Module *module = nullptr;
  std::string error;
  if (!llvm::readSpirv(context, options, in, module, error))
    return fail(ErrorCode::BadFormat, "SPIR-V to LLVM translation failed: " + error);
  std::unique_ptr<llvm::Module> owned(module);
  std::string broken;
  llvm::raw_string_ostream why(broken);
  if (llvm::verifyModule(*owned, &why))
    return fail(ErrorCode::BadFormat, "SPIR-V to LLVM translation made invalid LLVM IR: " + why.str());
  return owned;
}

namespace {

// The extensions a module declares, as the translator names them.
SPIRV::TranslatorOpts::ExtensionsStatusMap translatorExtensions(std::span<const uint32_t> words) {
  static const std::map<std::string_view, SPIRV::ExtensionID> kIds = {
#define EXT(X) {#X, SPIRV::ExtensionID::X},
#include <LLVMSPIRVLib/LLVMSPIRVExtensions.inc>
#undef EXT
  };
  SPIRV::TranslatorOpts::ExtensionsStatusMap declared;
  for (std::string_view name : declaredExtensions(words))
    if (auto it = kIds.find(name); it != kIds.end()) declared[it->second] = true;
  return declared;
}

}  // namespace

llvm::Expected<std::string> writeSpirvLike(llvm::Module &module, std::span<const uint32_t> like, const char *what) {
  const auto version = static_cast<SPIRV::VersionNumber>(
      std::clamp(like[kVersionWord], static_cast<uint32_t>(SPIRV::VersionNumber::MinimumVersion),
                 static_cast<uint32_t>(SPIRV::VersionNumber::MaximumVersion)));
  SPIRV::TranslatorOpts options(version, translatorExtensions(like));
  std::ostringstream out;
  std::string error;
  if (!llvm::writeSpirv(&module, options, out, error))
    return fail(ErrorCode::Unsupported, llvm::Twine(what) + " cannot be written as SPIR-V: " + error);
  return std::move(out).str();
}

llvm::Expected<std::vector<uint32_t>> validSpirv(const std::string &written, const char *what) {
  std::vector<uint32_t> words(written.size() / 4);
  std::memcpy(words.data(), written.data(), words.size() * 4);
  spirv::Context validator;
  spv_const_binary_t binary{words.data(), words.size()};
  if (spirv::Diagnostic diagnostic; spvValidate(validator.get(), &binary, diagnostic.out()) != SPV_SUCCESS)
    return fail(ErrorCode::Unsupported, llvm::Twine(what) + " written as SPIR-V is invalid: " + diagnostic.text());
  return words;
}

}  // namespace devdl::backend
#endif
