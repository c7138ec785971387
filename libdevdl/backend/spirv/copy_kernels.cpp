// devdl's copy kernels (spirv/copy_kernels.h): a kernel for each variable, written as LLVM IR
// beside imports of the variables as the defining image has them, and written as SPIR-V within
// that image's version and extensions by the translator, in the helper process.
#include "backend/spirv/copy_kernels.h"
#include "support/error.h"

#if DEVDL_HAVE_SPIRV_TRANSLATOR
#include "backend/spirv/translator.h"
#include "backend/spirv/translator_process.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#endif

namespace devdl::backend {

#if DEVDL_HAVE_SPIRV_TRANSLATOR
namespace {

// For each of `variables` the module declares in the global address space, a kernel of devdl's
// through which the host reads and writes it where the driver gives no variable addresses:
// copyKernelName(v)(uchar *buffer, ulong offset, ulong size, int toDevice) stores the variable's
// size in the buffer's first 8 bytes and, where [offset, offset + size) is inside the variable,
// copies between it and the buffer's bytes after those 8.
void addCopyKernels(llvm::Module &module, std::span<const std::string> variables) {
  llvm::LLVMContext &context = module.getContext();
  const llvm::DataLayout &layout = module.getDataLayout();
  llvm::IRBuilder<> builder(context);
  llvm::Type *i8 = builder.getInt8Ty(), *i32 = builder.getInt32Ty(), *i64 = builder.getInt64Ty();
  llvm::Type *bytes = llvm::PointerType::get(i8, 1);
  auto strings = [&](std::initializer_list<const char *> values) {
    std::vector<llvm::Metadata *> list;
    for (const char *v : values) list.push_back(llvm::MDString::get(context, v));
    return llvm::MDNode::get(context, list);
  };
  for (const std::string &name : variables) {
    llvm::GlobalVariable *variable = module.getGlobalVariable(name, /*AllowInternal=*/true);
    if (!variable || variable->getAddressSpace() != 1) continue;
    auto *type = llvm::FunctionType::get(builder.getVoidTy(), {bytes, i64, i64, i32}, false);
    auto *kernel = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, copyKernelName(name), module);
    kernel->setCallingConv(llvm::CallingConv::SPIR_KERNEL);
    kernel->addFnAttr(llvm::Attribute::NoUnwind);
    auto *one = llvm::ConstantAsMetadata::get(builder.getInt32(1));
    auto *zero = llvm::ConstantAsMetadata::get(builder.getInt32(0));
    kernel->setMetadata("kernel_arg_addr_space", llvm::MDNode::get(context, {one, zero, zero, zero}));
    kernel->setMetadata("kernel_arg_access_qual", strings({"none", "none", "none", "none"}));
    kernel->setMetadata("kernel_arg_type", strings({"uchar*", "ulong", "ulong", "int"}));
    kernel->setMetadata("kernel_arg_base_type", strings({"uchar*", "ulong", "ulong", "int"}));
    kernel->setMetadata("kernel_arg_type_qual", strings({"", "", "", ""}));
    llvm::Argument *buffer = kernel->getArg(0), *offset = kernel->getArg(1), *size = kernel->getArg(2),
                   *toDevice = kernel->getArg(3);
    auto *entry = llvm::BasicBlock::Create(context, "entry", kernel);
    auto *inside = llvm::BasicBlock::Create(context, "inside", kernel);
    auto *in = llvm::BasicBlock::Create(context, "in", kernel);
    auto *out = llvm::BasicBlock::Create(context, "out", kernel);
    auto *done = llvm::BasicBlock::Create(context, "done", kernel);
    builder.SetInsertPoint(entry);
    const uint64_t length = layout.getTypeAllocSize(variable->getValueType());
    llvm::Value *total = builder.getInt64(length);
    builder.CreateAlignedStore(total, builder.CreatePointerCast(buffer, llvm::PointerType::get(i64, 1)),
                               llvm::MaybeAlign(1));
    llvm::Value *fits = builder.CreateAnd(builder.CreateICmpULE(offset, total),
                                          builder.CreateICmpULE(size, builder.CreateSub(total, offset)));
    builder.CreateCondBr(fits, inside, done);
    builder.SetInsertPoint(inside);
    llvm::Value *there = builder.CreateInBoundsGEP(i8, builder.CreatePointerCast(variable, bytes), offset);
    llvm::Value *here = builder.CreateInBoundsGEP(i8, buffer, builder.getInt64(8));
    builder.CreateCondBr(builder.CreateICmpNE(toDevice, builder.getInt32(0)), in, out);
    builder.SetInsertPoint(in);
    builder.CreateMemCpy(there, llvm::MaybeAlign(1), here, llvm::MaybeAlign(1), size);
    builder.CreateBr(done);
    builder.SetInsertPoint(out);
    builder.CreateMemCpy(here, llvm::MaybeAlign(1), there, llvm::MaybeAlign(1), size);
    builder.CreateBr(done);
    builder.SetInsertPoint(done);
    builder.CreateRetVoid();
  }
}

}  // namespace
#endif

std::string copyKernelName(std::string_view variable) { return "__devdl_copy_" + std::string(variable); }

llvm::Expected<std::vector<uint32_t>> copyKernels(std::span<const uint32_t> definer,
                                                  std::span<const std::string> variables) {
#if !DEVDL_HAVE_SPIRV_TRANSLATOR
  return fail(ErrorCode::Unsupported, "this build of devdl has no SPIRV-LLVM-Translator (DEVDL_PORTABLE) to make "
                                      "copy kernels with");
#else
  translator::Request request{translator::Operation::CopyKernels, false, false, {},
                              {variables.begin(), variables.end()}, {definer.begin(), definer.end()}, {}, {}};
  auto written = translateInHelper(request);
  if (!written) return written.takeError();
  return validSpirv(*written, "the copy kernels");  // checked here too: a driver links them next
#endif
}

#if DEVDL_HAVE_SPIRV_TRANSLATOR
llvm::Expected<std::vector<uint32_t>> inProcess::copyKernels(std::span<const uint32_t> definer,
                                                             std::span<const std::string> variables) {
  std::string written;
  {
    std::lock_guard lock(translatorMutex);
    llvm::LLVMContext context;
    auto source = readModule(context, definer, {}, SPIRV::BIsRepresentation::SPIRVFriendlyIR);
    if (!source) return source.takeError();
    // Each variable imported as the image defines it: a linker pairs an import with the export
    // of the same type.
    llvm::Module module("devdl copy kernels", context);
    module.setTargetTriple((*source)->getTargetTriple());
    module.setDataLayout((*source)->getDataLayout());
    for (const char *version : {"opencl.ocl.version", "opencl.spir.version"})
      if (const llvm::NamedMDNode *node = (*source)->getNamedMetadata(version)) {
        llvm::NamedMDNode *copy = module.getOrInsertNamedMetadata(version);
        for (const llvm::MDNode *operand : node->operands()) copy->addOperand(const_cast<llvm::MDNode *>(operand));
      }
    std::vector<std::string> imported;
    for (const std::string &name : variables) {
      const llvm::GlobalVariable *defined = (*source)->getGlobalVariable(name);
      if (!defined || defined->isDeclaration() || defined->getAddressSpace() != 1) continue;
      auto *import = new llvm::GlobalVariable(module, defined->getValueType(), defined->isConstant(),
                                              llvm::GlobalValue::ExternalLinkage, nullptr, name, nullptr,
                                              llvm::GlobalValue::NotThreadLocal, 1);
      import->setAlignment(defined->getAlign());
      imported.push_back(name);
    }
    if (imported.empty()) return fail(ErrorCode::NotFound, "the image exports none of the variables to copy");
    addCopyKernels(module, imported);
    auto spirv = writeSpirvLike(module, definer, "the copy kernels");
    if (!spirv) return spirv.takeError();
    written = std::move(*spirv);
  }
  return validSpirv(written, "the copy kernels");
}
#endif

}  // namespace devdl::backend
