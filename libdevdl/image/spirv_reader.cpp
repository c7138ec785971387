// SPIR-V: SPIRV-Tools validates the module and parses it; exports and imports come from
// LinkageAttributes decorations, kernels from OpEntryPoint, spec constants from SpecId.
#include "image/readers.h"
#include "support/error.h"
#include "support/spirv_tools.h"

#include <spirv-tools/libspirv.h>
#include <spirv/unified1/spirv.h>

#include <llvm/ADT/STLExtras.h>
#include <llvm/Support/SwapByteOrder.h>

#include <cstring>
#include <unordered_map>
#include <set>
#include <unordered_set>

namespace devdl::readers {

namespace {

struct Linkage {
  uint32_t id;
  std::string_view name;
  uint32_t type;
};

struct SpirvFacts {
  const uint32_t *begin = nullptr;
  size_t numWords = 0;
  Storage *storage = nullptr;
  uint32_t addressing = 0;
  std::vector<Linkage> linkages;
  std::vector<std::pair<uint32_t, std::string_view>> kernels;  // function id, name
  std::unordered_set<uint32_t> variables;
  std::unordered_map<uint32_t, std::string_view> names;
  std::vector<std::pair<uint32_t, uint32_t>> specIds;  // target id, SpecId

  // A literal string operand: NUL-terminated within its words (the parser checked that).
  std::string_view literal(const spv_parsed_instruction_t *inst, uint16_t operand) const {
    const spv_parsed_operand_t &op = inst->operands[operand];
    const char *s = reinterpret_cast<const char *>(inst->words + op.offset);
    std::string_view view(s, strnlen(s, op.num_words * 4u));
    // Views stay valid only when the parser handed us our own words (native byte order).
    if (inst->words >= begin && inst->words < begin + numWords) return view;
    return storage->save(view);
  }
};

spv_result_t onInstruction(void *user, const spv_parsed_instruction_t *inst) {
  auto &f = *static_cast<SpirvFacts *>(user);
  auto word = [&](uint16_t operand) { return inst->words[inst->operands[operand].offset]; };
  switch (inst->opcode) {
    case SpvOpName:
      f.names.emplace(word(0), f.literal(inst, 1));
      break;
    case SpvOpMemoryModel:
      f.addressing = word(0);
      break;
    case SpvOpEntryPoint:
      if (word(0) == SpvExecutionModelKernel) f.kernels.emplace_back(word(1), f.literal(inst, 2));
      break;
    case SpvOpVariable:
      f.variables.insert(inst->result_id);
      break;
    case SpvOpDecorate:
      if (word(1) == SpvDecorationLinkageAttributes && inst->num_operands >= 4)
        f.linkages.push_back({word(0), f.literal(inst, 2), word(3)});
      else if (word(1) == SpvDecorationSpecId && inst->num_operands >= 3)
        f.specIds.emplace_back(word(0), word(2));
      break;
    default:
      break;
  }
  return SPV_SUCCESS;
}

}  // namespace

llvm::Error readSpirv(DeviceImage &image) {
  if (image.bytes.size() < 20 || image.bytes.size() % 4 != 0)
    return fail(ErrorCode::BadFormat, "invalid SPIR-V: size " + llvm::Twine(image.bytes.size()) +
                                          " is not a whole module (5 header words and 4-byte words)");
  // The parser reads 32-bit words; realign a copy if the caller's bytes are not aligned.
  if (reinterpret_cast<uintptr_t>(image.bytes.data()) % 4 != 0)
    image.bytes = image.storage->adopt(llvm::MemoryBuffer::getMemBufferCopy(asText(image.bytes)));

  const auto *words = reinterpret_cast<const uint32_t *>(image.bytes.data());
  const size_t numWords = image.bytes.size() / 4;
  spirv::Context context;

  spv_const_binary_t binary{words, numWords};
  if (spirv::Diagnostic validation; spvValidate(context.get(), &binary, validation.out()) != SPV_SUCCESS)
    return fail(ErrorCode::BadFormat, "invalid SPIR-V: " + validation.text());

  SpirvFacts facts;
  facts.begin = words;
  facts.numWords = numWords;
  facts.storage = image.storage.get();
  if (spirv::Diagnostic parsing;
      spvBinaryParse(context.get(), &facts, words, numWords, nullptr, onInstruction, parsing.out()) != SPV_SUCCESS)
    return fail(ErrorCode::BadFormat, "invalid SPIR-V: " + parsing.text());

  image.triple = facts.addressing == SpvAddressingModelPhysical64   ? "spir64-unknown-unknown"
                 : facts.addressing == SpvAddressingModelPhysical32 ? "spir-unknown-unknown"
                                                             : "spirv-unknown-unknown";
  // llvm-spirv emits a kernel as an entry-point wrapper around an exported function of the
  // same name: list that name once, as the kernel.
  std::unordered_set<std::string_view> kernelNames;
  for (const auto &[id, name] : facts.kernels) {
    kernelNames.insert(name);
    image.symbols.push_back({name, SymbolKind::Kernel});
  }
  for (const Linkage &l : facts.linkages) {
    if (l.type == SpvLinkageTypeImport) {
      if (auto import = spirImport(l.name)) image.symbols.push_back(*import);
    } else if ((l.type == SpvLinkageTypeExport || l.type == SpvLinkageTypeLinkOnceODR) && !kernelNames.count(l.name)) {
      image.symbols.push_back(
          {l.name, facts.variables.count(l.id) ? SymbolKind::Variable : SymbolKind::Function});
    }
  }
  for (const auto &[id, specId] : facts.specIds) {
    auto name = facts.names.find(id);
    std::string fallback = "SpecId " + std::to_string(specId);
    image.setProperty(kSpecConstantsSet, name != facts.names.end() ? name->second : fallback, specId);
  }
  return llvm::Error::success();
}

llvm::Expected<std::string> spirvWithLocalDefinitions(Bytes bytes, std::span<const std::string_view> names) {
  if (bytes.size() < 20 || bytes.size() % 4 != 0)
    return fail(ErrorCode::BadFormat, "invalid SPIR-V: size " + llvm::Twine(bytes.size()) + " is not a whole module");
  std::vector<uint32_t> words(bytes.size() / 4);
  std::memcpy(words.data(), bytes.data(), bytes.size());
  // OpDecorate %target LinkageAttributes "name" Export of one of `names`: the decoration goes,
  // and the definition is the module's own.
  auto hiddenExport = [&](const spv_parsed_instruction_t *inst) {
    if (inst->opcode != SpvOpDecorate || inst->num_operands < 4 ||
        inst->words[inst->operands[1].offset] != SpvDecorationLinkageAttributes)
      return false;
    const spv_parsed_operand_t &name = inst->operands[2];
    const char *text = reinterpret_cast<const char *>(inst->words + name.offset);
    const uint32_t type = inst->words[inst->operands[3].offset];
    return (type == SpvLinkageTypeExport || type == SpvLinkageTypeLinkOnceODR) &&
           llvm::is_contained(names, std::string_view(text, strnlen(text, name.num_words * 4u)));
  };
  struct Edit {
    decltype(hiddenExport) &hidden;
    std::set<uint32_t> ids;  // the definitions made local, found by the first pass
    bool writing = false;
    std::vector<uint32_t> out;
  } edit{hiddenExport, {}, false, {}};
  // The parser hands each instruction over in this host's byte order: the header too.
  edit.out.assign(words.begin(), words.begin() + 5);
  if (edit.out[0] != SpvMagicNumber)
    for (uint32_t &word : edit.out) word = llvm::ByteSwap_32(word);
  // Their names go too (OpName comes before the decorations, hence two passes): the program they
  // are linked into must not answer to them for another image's definition (a variable the host
  // reads by name).
  auto visit = [](void *user, const spv_parsed_instruction_t *inst) -> spv_result_t {
    auto &edit = *static_cast<Edit *>(user);
    const bool hidden = edit.hidden(inst);
    if (!edit.writing) {
      if (hidden) edit.ids.insert(inst->words[inst->operands[0].offset]);
      return SPV_SUCCESS;
    }
    if (hidden || (inst->opcode == SpvOpName && inst->num_words >= 2 && edit.ids.count(inst->words[1])))
      return SPV_SUCCESS;
    edit.out.insert(edit.out.end(), inst->words, inst->words + inst->num_words);
    return SPV_SUCCESS;
  };
  spirv::Context context;
  for (bool writing : {false, true}) {
    edit.writing = writing;
    if (spirv::Diagnostic parsing;
        spvBinaryParse(context.get(), &edit, words.data(), words.size(), nullptr, visit, parsing.out()) != SPV_SUCCESS)
      return fail(ErrorCode::BadFormat, "invalid SPIR-V: " + parsing.text());
  }
  return std::string(reinterpret_cast<const char *>(edit.out.data()), edit.out.size() * 4);
}

}  // namespace devdl::readers
