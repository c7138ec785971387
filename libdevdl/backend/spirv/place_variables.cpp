// A translated program's variables placed in a region of host memory (spirv/place_variables.h):
// which variables move, the region's layout and first bytes from their initializers, and their
// uses pointed at the region.
#include "backend/spirv/place_variables.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/Analysis/ConstantFolding.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/DataLayout.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <span>
#include <vector>

namespace devdl::backend {

namespace {

// Where a variable's initializer holds the address of another (or of a place in one): whether that
// other is placed too, and if so records the relocation.
using Relocate = llvm::function_ref<bool(const llvm::GlobalValue &target, int64_t addend, uint64_t at)>;

// Writes at `out`, the region's offset `at` (`layout.getTypeStoreSize` bytes, zero already), what
// `value` stores: numbers, aggregates of them, and addresses in variables `relocate` takes. False
// where it holds another address (a function's, a constant's), which only the device's own
// loader fills in.
bool writeConstant(const llvm::Constant &value, const llvm::DataLayout &layout, char *out, uint64_t at,
                   Relocate relocate) {
  if (llvm::isa<llvm::ConstantAggregateZero, llvm::ConstantPointerNull, llvm::UndefValue>(value)) return true;
  auto bits = [&](const llvm::APInt &number) {
    const size_t bytes = std::min<size_t>(layout.getTypeStoreSize(value.getType()), number.getNumWords() * 8);
    std::memcpy(out, number.getRawData(), bytes);  // the device is the host: its byte order
    return true;
  };
  if (const auto *integer = llvm::dyn_cast<llvm::ConstantInt>(&value)) return bits(integer->getValue());
  if (const auto *real = llvm::dyn_cast<llvm::ConstantFP>(&value)) return bits(real->getValueAPF().bitcastToAPInt());
  if (const auto *data = llvm::dyn_cast<llvm::ConstantDataSequential>(&value)) {
    const llvm::StringRef raw = data->getRawDataValues();
    std::memcpy(out, raw.data(), raw.size());
    return true;
  }
  if (const auto *structure = llvm::dyn_cast<llvm::ConstantStruct>(&value)) {
    const llvm::StructLayout *fields = layout.getStructLayout(structure->getType());
    for (unsigned i = 0; i < structure->getNumOperands(); ++i) {
      const uint64_t offset = fields->getElementOffset(i);
      if (!writeConstant(*structure->getOperand(i), layout, out + offset, at + offset, relocate)) return false;
    }
    return true;
  }
  if (llvm::isa<llvm::ConstantArray, llvm::ConstantVector>(value)) {
    const bool array = value.getType()->isArrayTy();
    llvm::Type *element = array ? value.getType()->getArrayElementType()
                                : llvm::cast<llvm::VectorType>(value.getType())->getElementType();
    if (!array && layout.getTypeSizeInBits(element) % 8) return false;  // a vector's elements of bits are packed
    const uint64_t stride = array ? layout.getTypeAllocSize(element) : layout.getTypeStoreSize(element);
    for (unsigned i = 0; i < value.getNumOperands(); ++i)
      if (!writeConstant(*llvm::cast<llvm::Constant>(value.getOperand(i)), layout, out + i * stride, at + i * stride,
                         relocate))
        return false;
    return true;
  }
  // A generic pointer to a global one: the same address on a device that is the host.
  if (const auto *cast = llvm::dyn_cast<llvm::ConstantExpr>(&value);
      cast && cast->getOpcode() == llvm::Instruction::AddrSpaceCast)
    return writeConstant(*cast->getOperand(0), layout, out, at, relocate);
  // An address: of a global, plus a constant offset, in a field of 64 bits.
  llvm::GlobalValue *target = nullptr;
  llvm::APInt offset;
  return layout.getTypeStoreSize(value.getType()) == 8 &&
         llvm::IsConstantOffsetFromGlobal(const_cast<llvm::Constant *>(&value), target, offset, layout) &&
         relocate(*target, offset.getSExtValue(), at);
}

constexpr uint64_t kPage = 4096;  // the region's alignment

// Where each variable that moves lies in the region (0 until laid out).
using Offsets = std::map<const llvm::GlobalValue *, uint64_t>;

// The module's variables in the global address space that the region can take; none where they
// are more than a region takes.
Offsets placeableVariables(llvm::Module &module, const llvm::DataLayout &layout) {
  // What llvm.used names must stay a global to be named there.
  llvm::SmallVector<llvm::GlobalValue *> used;
  llvm::collectUsedGlobalVariables(module, used, /*CompilerUsed=*/false);
  llvm::collectUsedGlobalVariables(module, used, /*CompilerUsed=*/true);
  Offsets offsets;
  uint64_t total = 0;
  for (llvm::GlobalVariable &variable : module.globals()) {
    const uint64_t size = variable.isDeclaration() ? 0 : layout.getTypeAllocSize(variable.getValueType());
    if (!size || variable.getAddressSpace() != 1 || variable.getAlign().valueOrOne() > kPage ||
        llvm::is_contained(used, &variable))
      continue;
    total += std::min(size, kMaxRegion + 1);
    if (total > kMaxRegion) return {};  // more than a region takes: none moves
    offsets[&variable] = 0;
  }
  return offsets;
}

// Until none is dropped: a variable whose initializer holds an address outside the region.
void dropAddressingOutside(Offsets &offsets, const llvm::DataLayout &layout) {
  std::string scratch;
  for (bool dropped = true; dropped;) {
    dropped = false;
    for (auto it = offsets.begin(); it != offsets.end();) {
      const auto *variable = llvm::cast<llvm::GlobalVariable>(it->first);
      if (variable->getInitializer()->isNullValue()) {  // zero: nothing to write
        ++it;
        continue;
      }
      scratch.assign(layout.getTypeAllocSize(variable->getValueType()), '\0');
      const bool stays = !writeConstant(*variable->getInitializer(), layout, scratch.data(), 0,
                                        [&](const llvm::GlobalValue &target, int64_t, uint64_t) {
                                          return offsets.count(&target) > 0;
                                        });
      dropped |= stays;
      it = stays ? offsets.erase(it) : std::next(it);
    }
  }
}

// The variables that move, in the module's order, each given its offset in `region`, which gets
// its size, its named variables and room for its first bytes; none where they are more than a
// region takes.
std::vector<llvm::GlobalVariable *> layOutRegion(llvm::Module &module, const llvm::DataLayout &layout,
                                                 Offsets &offsets, VariableLayout &region) {
  std::vector<llvm::GlobalVariable *> moved;
  uint64_t initialized = 0;  // where the last variable that does not start as zero ends
  for (llvm::GlobalVariable &variable : module.globals()) {  // in the module's order
    if (!offsets.count(&variable)) continue;
    const llvm::Align align = std::max(variable.getAlign().valueOrOne(), layout.getPrefTypeAlign(variable.getValueType()));
    const uint64_t offset = llvm::alignTo(region.size, std::min(align.value(), kPage));
    const uint64_t size = layout.getTypeAllocSize(variable.getValueType());
    if (offset + size > kMaxRegion) return {};  // more than a region takes: none moves
    offsets[&variable] = offset;
    region.size = offset + size;
    if (!variable.getInitializer()->isNullValue()) initialized = region.size;
    // By the name an image exports it under (linkSpirv drops the others' names).
    if (variable.hasName()) region.variables.push_back({variable.getName().str(), offset, size});
    moved.push_back(&variable);
  }
  region.initial.assign(initialized, '\0');
  return moved;
}

// The region's first bytes from the initializers of the variables that move, and its relocations.
void writeInitialBytes(std::span<llvm::GlobalVariable *const> moved, Offsets &offsets, const llvm::DataLayout &layout,
                       VariableLayout &region) {
  for (llvm::GlobalVariable *variable : moved) {
    if (variable->getInitializer()->isNullValue()) continue;  // within `initial`: zero already
    const uint64_t offset = offsets[variable];
    writeConstant(*variable->getInitializer(), layout, region.initial.data() + offset, offset,
                  [&](const llvm::GlobalValue &target, int64_t addend, uint64_t at) {
                    region.relocations.push_back({at, offsets[&target] + addend});
                    return true;
                  });
  }
  region.initial.erase(region.initial.find_last_not_of('\0') + 1);
}

// Points each use of a variable that moved at its place in the region at `address`; the variable goes.
void pointUsesAtRegion(llvm::Module &module, std::span<llvm::GlobalVariable *const> moved, Offsets &offsets,
                   uint64_t address) {
  llvm::Type *i64 = llvm::Type::getInt64Ty(module.getContext());
  for (llvm::GlobalVariable *variable : moved) {
    variable->replaceAllUsesWith(
        llvm::ConstantExpr::getIntToPtr(llvm::ConstantInt::get(i64, address + offsets[variable]), variable->getType()));
    variable->eraseFromParent();
  }
}

}  // namespace

llvm::Error placeVariables(llvm::Module &module, PlaceVariables place) {
  const llvm::DataLayout &layout = module.getDataLayout();
  if (layout.getPointerSizeInBits(1) != 64) return llvm::Error::success();  // addresses of 32 bits: SPIR, not SPIR64
  Offsets offsets = placeableVariables(module, layout);
  dropAddressingOutside(offsets, layout);
  if (offsets.empty()) return llvm::Error::success();
  VariableLayout region;
  const std::vector<llvm::GlobalVariable *> moved = layOutRegion(module, layout, offsets, region);
  if (moved.empty()) return llvm::Error::success();
  writeInitialBytes(moved, offsets, layout, region);
  auto address = place(region);
  if (!address) return address.takeError();
  pointUsesAtRegion(module, moved, offsets, *address);
  return llvm::Error::success();
}

}  // namespace devdl::backend
