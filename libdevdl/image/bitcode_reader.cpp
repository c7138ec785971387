// SPIR images (LLVM bitcode). The module is read lazily: declarations and linkage only, no
// function bodies. LLVM's bitcode symbol table (irsymtab) would give names and linkage too, but
// not the calling convention that tells a SPIR kernel from a function.
#include "image/readers.h"
#include "support/error.h"

#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

namespace devdl::readers {

llvm::Error readBitcode(DeviceImage &image) {
  llvm::LLVMContext context;
  llvm::MemoryBufferRef ref(llvm::StringRef(asText(image.bytes)), "");
  auto module = llvm::getLazyBitcodeModule(ref, context);
  if (!module)
    return fail(ErrorCode::BadFormat, "invalid LLVM bitcode: " + llvm::toString(module.takeError()));
  llvm::Module &m = **module;
  image.triple = image.storage->save(m.getTargetTriple());

  // Names live in the module, which dies with this function: keep copies in storage.
  auto add = [&](llvm::StringRef name, SymbolKind kind) {
    image.symbols.push_back({image.storage->save(std::string_view(name.data(), name.size())), kind});
  };
  for (const llvm::Function &f : m.functions()) {
    if (f.isIntrinsic() || f.hasLocalLinkage()) continue;
    if (f.isDeclaration()) {
      if (isImportableName(std::string_view(f.getName().data(), f.getName().size())))
        add(f.getName(), SymbolKind::Import);
    } else {
      add(f.getName(), f.getCallingConv() == llvm::CallingConv::SPIR_KERNEL ? SymbolKind::Kernel
                                                                           : SymbolKind::Function);
    }
  }
  for (const llvm::GlobalVariable &g : m.globals()) {
    if (g.hasLocalLinkage() || g.getName().startswith("llvm.")) continue;
    if (g.isDeclaration()) {
      if (isImportableName(std::string_view(g.getName().data(), g.getName().size())))
        add(g.getName(), SymbolKind::Import);
    } else {
      add(g.getName(), SymbolKind::Variable);
    }
  }
  return llvm::Error::success();
}

}  // namespace devdl::readers
