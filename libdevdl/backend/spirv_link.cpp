#include "backend/spirv_link.h"
#include "support/error.h"

#if DEVDL_HAVE_SPIRV_TRANSLATOR
#include <LLVMSPIRVLib/LLVMSPIRVLib.h>
#endif
#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>
#include <spirv-tools/linker.hpp>

#include <algorithm>
#include <cstring>
#include <sstream>

namespace devdl::backend {

namespace {

constexpr size_t kVersionWord = 1;

}  // namespace

llvm::Expected<std::vector<uint32_t>> linkSpirv(std::span<const DeviceImage *const> images,
                                                std::span<const std::string> labels) {
  std::vector<std::vector<uint32_t>> modules;
  uint32_t version = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    const Bytes bytes = images[i]->bytes;
    if (images[i]->format != ImageFormat::SpirV || bytes.size() % 4 || bytes.size() < 20)
      return inImage(fail(ErrorCode::Unsupported, "not a SPIR-V module: cannot link it as SPIR-V"), labels[i]);
    std::vector<uint32_t> words(bytes.size() / 4);
    std::memcpy(words.data(), bytes.data(), bytes.size());
    version = std::max(version, words[kVersionWord]);
    modules.push_back(std::move(words));
  }
  for (auto &words : modules) words[kVersionWord] = version;

  // The linker reports through the consumer; the message names the module by its position.
  std::string messages;
  spvtools::Context context(SPV_ENV_UNIVERSAL_1_6);
  context.SetMessageConsumer([&](spv_message_level_t, const char *, const spv_position_t &, const char *message) {
    if (!messages.empty()) messages += "; ";
    messages += message;
  });
  spvtools::LinkerOptions options;
  options.SetVerifyIds(true);
  std::vector<uint32_t> linked;
  if (spvtools::Link(context, modules, &linked, options) != SPV_SUCCESS) {
    std::string names;
    for (size_t i = 0; i < labels.size(); ++i) names += (i ? ", " : "") + std::to_string(i + 1) + " = " + labels[i];
    return fail(ErrorCode::Unresolved, "SPIR-V link failed: " + messages + " (modules " + names + ")");
  }
  return linked;
}

bool canTranslateToSpir() { return DEVDL_HAVE_SPIRV_TRANSLATOR; }

llvm::Expected<std::string> spirvToSpir(std::span<const uint32_t> words,
                                        std::span<const SpecConstant> specConstants) {
#if !DEVDL_HAVE_SPIRV_TRANSLATOR
  return fail(ErrorCode::Unsupported, "this build of devdl has no SPIRV-LLVM-Translator (DEVDL_PORTABLE): the "
                                      "device must take SPIR-V itself");
#else
  SPIRV::TranslatorOpts options;
  options.enableAllExtensions();
  options.setDesiredBIsRepresentation(SPIRV::BIsRepresentation::OpenCL12);
  for (const auto &[id, value] : specConstants) options.setSpecConst(id, value);

  std::istringstream in(std::string(reinterpret_cast<const char *>(words.data()), words.size() * 4));
  llvm::LLVMContext context;
  llvm::Module *module = nullptr;
  std::string error;
  if (!llvm::readSpirv(context, options, in, module, error))
    return fail(ErrorCode::BadFormat, "SPIR-V to SPIR translation failed: " + error);
  std::unique_ptr<llvm::Module> owned(module);
  std::string bitcode;
  llvm::raw_string_ostream os(bitcode);
  llvm::WriteBitcodeToFile(*owned, os);
  os.flush();
  return bitcode;
#endif
}

}  // namespace devdl::backend
