// A linked SPIR-V module translated to SPIR, or optimized and written back as SPIR-V
// (spirv/translation.h): in the helper process, and there the translator's reader, the variables
// placed where the backend asks, LLVM's optimization across the former images (load-time LTO),
// and the bitcode writer. A build without the translator reads the module with the machine's
// llvm-spirv-15 (spirv/translator_command.h) and does the rest itself, but for the optimization.
#include "backend/spirv/translation.h"
#include "backend/spirv/translator_command.h"
#include "image/instance_cells.h"
#include "support/error.h"

#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>

#if DEVDL_HAVE_SPIRV_TRANSLATOR
#include "backend/spirv/translator.h"
#include "backend/spirv/translator_process.h"

#include <llvm/Passes/PassBuilder.h>
#endif

namespace devdl::backend {

namespace {

#if DEVDL_HAVE_SPIRV_TRANSLATOR

// What the images exported to each other is the program's own once they are linked: every
// function but the kernels becomes internal, and LLVM's -O2 pipeline inlines across the former
// image boundaries and drops what no kernel reaches.
void optimizeAcrossImages(llvm::Module &module) {
  for (llvm::Function &function : module)
    if (!function.isDeclaration() && function.getCallingConv() != llvm::CallingConv::SPIR_KERNEL)
      function.setLinkage(llvm::GlobalValue::InternalLinkage);
  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager sccs;
  llvm::ModuleAnalysisManager modules;
  llvm::PassBuilder builder;
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(sccs);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, sccs, modules);
  builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2).run(module, modules);
}

#endif

// A cell (image/instance_cells.h) holds the same address while its program lives, set before any
// kernel runs: its loads are invariant, so that a loop storing through the address it gives need
// not load it again (LLVM could not tell that such a store leaves the cell as it was).
void markCellLoadsInvariant(llvm::Module &module) {
  for (llvm::GlobalVariable &variable : module.globals()) {
    if (!variable.getName().startswith(kInstanceCellPrefix)) continue;
    for (llvm::User *user : variable.users())
      if (auto *load = llvm::dyn_cast<llvm::LoadInst>(user))
        load->setMetadata(llvm::LLVMContext::MD_invariant_load, llvm::MDNode::get(module.getContext(), {}));
  }
}

// The module read from SPIR-V made SPIR for the device, as bitcode: the cells' loads invariant,
// the variables placed where `place` says, optimized across its former images where asked (and
// the build has LLVM's optimizer).
llvm::Expected<std::string> finishedSpir(llvm::Module &module, bool optimize, PlaceVariables place) {
  markCellLoadsInvariant(module);
  if (place)
    if (llvm::Error err = placeVariables(module, place)) return err;
#if DEVDL_HAVE_SPIRV_TRANSLATOR
  if (optimize) optimizeAcrossImages(module);
#else
  (void)optimize;
#endif
  std::string bitcode;
  llvm::raw_string_ostream os(bitcode);
  llvm::WriteBitcodeToFile(module, os);
  os.flush();
  return bitcode;
}

}  // namespace

bool hasTranslatorHelper() { return DEVDL_HAVE_SPIRV_TRANSLATOR; }

bool canTranslateToSpir() { return hasTranslatorHelper() || translatorCommand().has_value(); }

std::string spirTranslationStatement() {
  if (hasTranslatorHelper()) return "SPIR-V is translated to SPIR for OpenCL devices that take only SPIR (PoCL 3)";
  if (translatorCommand())
    return "SPIR-V is translated to SPIR for OpenCL devices that take only SPIR (PoCL 3) by " + *translatorCommand() +
           " (this build has no SPIRV-LLVM-Translator of its own)";
  return "no SPIRV-LLVM-Translator in this build (the portable library, the wheel), and no llvm-spirv-15 on PATH: "
         "SPIR-V is linked for devices that take SPIR-V, and refused, saying so, on those that take only SPIR (PoCL 3)";
}

llvm::Expected<std::string> spirvToSpir(std::span<const uint32_t> words, std::span<const SpecConstant> specConstants,
                                        bool optimize, PlaceVariables place) {
#if !DEVDL_HAVE_SPIRV_TRANSLATOR
  if (!translatorCommand())
    return fail(ErrorCode::Unsupported, "this build of devdl has no SPIRV-LLVM-Translator, and no llvm-spirv-15 was "
                                        "found on PATH to translate with (Debian: apt-get install llvm-spirv-15; "
                                        "DEVDL_LLVM_SPIRV names another)");
  llvm::LLVMContext context;
  auto module = readByCommand(*translatorCommand(), context, words, specConstants);
  if (!module) return module.takeError();
  return finishedSpir(**module, optimize, place);
#else
  translator::Request request{translator::Operation::Spir, optimize, static_cast<bool>(place),
                              {specConstants.begin(), specConstants.end()}, {}, {words.begin(), words.end()}, {}, {}};
  auto bitcode = translateInHelper(request, place);
  if (!bitcode) return bitcode.takeError();
  // The driver parses it next: what the helper made must at least be bitcode.
  if (bitcode->size() < 4 || bitcode->compare(0, 4, "BC\xc0\xde") != 0)
    return fail(ErrorCode::Unsupported, "the SPIR-V translator (" + translatorPath() + ") wrote not the expected output: no bitcode");
  return bitcode;
#endif
}

llvm::Expected<std::vector<uint32_t>> optimizeSpirv(std::span<const uint32_t> words,
                                                    std::span<const SpecConstant> specConstants) {
#if !DEVDL_HAVE_SPIRV_TRANSLATOR
  return fail(ErrorCode::Unsupported, "this build of devdl has no SPIRV-LLVM-Translator (DEVDL_PORTABLE)");
#else
  translator::Request request{translator::Operation::OptimizeSpirv, false, false,
                              {specConstants.begin(), specConstants.end()}, {}, {words.begin(), words.end()}, {}, {}};
  auto written = translateInHelper(request);
  if (!written) return written.takeError();
  return validSpirv(*written, "the optimized module");  // checked here too: the driver takes it next
#endif
}

#if DEVDL_HAVE_SPIRV_TRANSLATOR
namespace inProcess {

llvm::Expected<std::string> spirvToSpir(std::span<const uint32_t> words, std::span<const SpecConstant> specConstants,
                                        bool optimize, PlaceVariables place) {
  std::lock_guard lock(translatorMutex);
  llvm::LLVMContext context;
  auto module = readModule(context, words, specConstants, SPIRV::BIsRepresentation::OpenCL12);
  if (!module) return module.takeError();
  return finishedSpir(**module, optimize, place);
}

llvm::Expected<std::vector<uint32_t>> optimizeSpirv(std::span<const uint32_t> words,
                                                    std::span<const SpecConstant> specConstants) {
  std::string written;
  {
    std::lock_guard lock(translatorMutex);
    llvm::LLVMContext context;
    auto module = readModule(context, words, specConstants, SPIRV::BIsRepresentation::SPIRVFriendlyIR);
    if (!module) return module.takeError();
    optimizeAcrossImages(**module);
    auto spirv = writeSpirvLike(**module, words, "the optimized module");
    if (!spirv) return spirv.takeError();
    written = std::move(*spirv);
  }
  return validSpirv(written, "the optimized module");
}

}  // namespace inProcess
#endif

}  // namespace devdl::backend
