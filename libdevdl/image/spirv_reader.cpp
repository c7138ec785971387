// SPIR-V: SPIRV-Tools validates the module and parses it; exports and imports come from
// LinkageAttributes decorations, kernels from OpEntryPoint, spec constants from SpecId. And, for a
// link split into parts, what each function and variable uses (spirvCodeGraph).
#include "image/code_graph.h"
#include "image/readers.h"
#include "image/spirv_layout.h"
#include "support/error.h"
#include "support/spirv_tools.h"
#include "support/xxh3.h"

#include <spirv-tools/libspirv.h>
#include <spirv/unified1/spirv.h>

#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/SwapByteOrder.h>

#include <cstring>
#include <optional>
#include <span>
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
  uint32_t addressing = 0;
  bool extensions = false;  // it declares one
  std::vector<Linkage> linkages;
  std::vector<std::pair<uint32_t, std::string_view>> kernels;  // function id, name
  std::unordered_set<uint32_t> variables;
  std::unordered_set<uint32_t> functions;  // the result ids of OpFunction
  std::vector<uint32_t> crossWorkgroup;   // module-scope CrossWorkgroup variables, in order
  std::unordered_set<uint32_t> readOnly;  // decorated Constant
  std::unordered_map<uint32_t, std::string_view> names;
  std::vector<std::pair<uint32_t, uint32_t>> specIds;  // target id, SpecId
};

// A literal string at `first` among an instruction's operands: NUL-terminated within them; and
// the operand after it. Nullopt where it is not terminated.
std::optional<std::string_view> literalAt(std::span<const uint32_t> operands, size_t first, size_t *next = nullptr) {
  if (first >= operands.size()) return std::nullopt;
  const char *text = reinterpret_cast<const char *>(operands.data() + first);
  const size_t room = (operands.size() - first) * 4, length = strnlen(text, room);
  if (length == room) return std::nullopt;
  if (next) *next = first + length / 4 + 1;
  return std::string_view(text, length);
}

// Calls `each(at, opcode, operands)` for every instruction of a module in this host's byte order,
// bounds-checked: devdl's own reading, which needs no grammar (a module declaring a capability
// newer than SPIRV-Tools reads all the same). Stops at the first error `each` gives.
llvm::Error forEachInstruction(std::span<const uint32_t> words,
                               llvm::function_ref<llvm::Error(size_t, uint32_t, std::span<const uint32_t>)> each) {
  for (size_t at = 5; at < words.size();) {
    const uint32_t count = words[at] >> 16, opcode = words[at] & 0xffff;
    if (count == 0) return fail(ErrorCode::BadFormat, "invalid SPIR-V: an instruction of no words (at word " + llvm::Twine(at) + ")");
    if (count > words.size() - at)
      return fail(ErrorCode::BadFormat, "invalid SPIR-V: an instruction past the module's end (at word " + llvm::Twine(at) + ")");
    if (llvm::Error err = each(at, opcode, words.subspan(at + 1, count - 1))) return err;
    at += count;
  }
  return llvm::Error::success();
}

// What devdl needs of a module (names, linkage, entry points, variables, specialization ids), read
// by forEachInstruction. Strings are views into `words`.
llvm::Error walkSpirv(std::span<const uint32_t> words, SpirvFacts &f) {
  bool inFunctions = false;
  return forEachInstruction(words, [&](size_t at, uint32_t opcode, std::span<const uint32_t> operands) -> llvm::Error {
    auto bad = [&](const char *why) {
      return fail(ErrorCode::BadFormat, "invalid SPIR-V: " + llvm::Twine(why) + " (at word " + llvm::Twine(at) + ")");
    };
    switch (opcode) {
      case SpvOpName:
        if (auto name = literalAt(operands, 1); name && operands.size() >= 2) f.names.emplace(operands[0], *name);
        else return bad("OpName of no terminated string");
        break;
      case SpvOpExtension: f.extensions = true; break;
      case SpvOpMemoryModel:
        if (operands.size() < 2) return bad("OpMemoryModel of too few words");
        f.addressing = operands[0];
        break;
      case SpvOpEntryPoint:
        if (auto name = literalAt(operands, 2); !name || operands.size() < 3) return bad("OpEntryPoint of no terminated name");
        else if (operands[0] == SpvExecutionModelKernel) f.kernels.emplace_back(operands[1], *name);
        break;
      case SpvOpFunction:
        if (operands.size() < 2) return bad("OpFunction of too few words");
        inFunctions = true;
        f.functions.insert(operands[1]);
        break;
      case SpvOpVariable:
        if (operands.size() < 3) return bad("OpVariable of too few words");
        f.variables.insert(operands[1]);
        if (!inFunctions && operands[2] == SpvStorageClassCrossWorkgroup) f.crossWorkgroup.push_back(operands[1]);
        break;
      case SpvOpDecorate:
        if (operands.size() < 2) return bad("OpDecorate of too few words");
        if (operands[1] == SpvDecorationConstant) f.readOnly.insert(operands[0]);
        if (operands[1] == SpvDecorationLinkageAttributes) {
          size_t next = 0;
          auto name = literalAt(operands, 2, &next);
          if (!name || next >= operands.size()) return bad("LinkageAttributes of no name or no linkage type");
          f.linkages.push_back({operands[0], *name, operands[next]});
        } else if (operands[1] == SpvDecorationSpecId) {
          if (operands.size() < 3) return bad("SpecId of no number");
          f.specIds.emplace_back(operands[0], operands[2]);
        }
        break;
      default: break;
    }
    return llvm::Error::success();
  });
}

// Statics' names: the OpName, or `OpName.id` where it has none or another has it too.
std::vector<std::string> staticNames(std::span<const std::pair<uint32_t, std::string_view>> named) {
  std::unordered_map<std::string_view, unsigned> count;
  for (const auto &[id, name] : named) ++count[name];
  std::vector<std::string> names;
  for (const auto &[id, name] : named)
    names.push_back(!name.empty() && count[name] == 1 ? std::string(name) : std::string(name) + "." + std::to_string(id));
  return names;
}

// The module's statics (readers::spirvStatics): writable variables without linkage.
std::vector<std::pair<uint32_t, std::string>> staticsOf(const SpirvFacts &facts) {
  std::unordered_set<uint32_t> linked;
  for (const Linkage &l : facts.linkages) linked.insert(l.id);
  std::vector<std::pair<uint32_t, std::string_view>> named;
  for (uint32_t id : facts.crossWorkgroup)
    if (!linked.count(id) && !facts.readOnly.count(id)) {
      auto name = facts.names.find(id);
      named.emplace_back(id, name == facts.names.end() ? std::string_view() : name->second);
    }
  std::vector<std::string> names = staticNames(named);
  std::vector<std::pair<uint32_t, std::string>> statics;
  for (size_t k = 0; k < named.size(); ++k) statics.emplace_back(named[k].first, std::move(names[k]));
  return statics;
}

// SPIRV-Tools vouches for the module, or says why not. Where it says so of a module that
// declares extensions, its rules or its grammar are older than the module (Debian's 2023.1 knows
// neither a bfloat16 conversion's capability nor the rules of SPV_INTEL_memory_access_aliasing):
// the image is read, not validated, and goes only where a driver judges it (SPIR-V IL), never to
// devdl's own SPIR-V processing. A module valid but for the layout of its blocks
// (spirv_layout.h) becomes the image laid out as SPIR-V asks, as one of the other byte order
// becomes the image in this host's: its merge instructions kept where that is valid, else
// dropped. (What was read of the module points into the first bytes, which the storage keeps.)
llvm::Error vouchFor(DeviceImage &image, std::span<const uint32_t> words, bool declaresExtensions) {
  spirv::Context context;
  spv_const_binary_t binary{words.data(), words.size()};
  spirv::Diagnostic validation;
  if (spvValidate(context.get(), &binary, validation.out()) == SPV_SUCCESS) return llvm::Error::success();
  for (MergeInstructions merges : {MergeInstructions::Kept, MergeInstructions::Dropped}) {
    std::optional<std::vector<uint32_t>> laidOut = inLayoutOrder(words, merges);
    if (!laidOut) continue;
    spv_const_binary_t again{laidOut->data(), laidOut->size()};
    if (spirv::Diagnostic diagnostic; spvValidate(context.get(), &again, diagnostic.out()) != SPV_SUCCESS) continue;
    auto buffer = llvm::WritableMemoryBuffer::getNewUninitMemBuffer(laidOut->size() * 4);
    std::memcpy(buffer->getBufferStart(), laidOut->data(), laidOut->size() * 4);
    image.bytes = image.storage->adopt(std::move(buffer));
    return llvm::Error::success();
  }
  std::string why = validation.text();
  if (!declaresExtensions) return fail(ErrorCode::BadFormat, "invalid SPIR-V: " + why);
  if (size_t line = why.find("\n"); line != std::string::npos) why.resize(line);
  image.unvalidated = image.storage->save(why);
  return llvm::Error::success();
}

}  // namespace


llvm::Error readSpirv(DeviceImage &image) {
  if (image.bytes.size() < 20 || image.bytes.size() % 4 != 0)
    return fail(ErrorCode::BadFormat, "invalid SPIR-V: size " + llvm::Twine(image.bytes.size()) +
                                          " is not a whole module (5 header words and 4-byte words)");
  // The words are read as 32-bit words; realign a copy if the caller's bytes are not aligned.
  if (reinterpret_cast<uintptr_t>(image.bytes.data()) % 4 != 0)
    image.bytes = image.storage->adopt(llvm::MemoryBuffer::getMemBufferCopy(asText(image.bytes)));

  std::span<const uint32_t> words(reinterpret_cast<const uint32_t *>(image.bytes.data()), image.bytes.size() / 4);
  // A module of the other byte order (valid SPIR-V: the magic number tells) becomes the image in
  // this host's, which is what every linker, driver and cache key after the reader sees.
  if (words[0] == llvm::ByteSwap_32(SpvMagicNumber)) {
    auto swapped = llvm::WritableMemoryBuffer::getNewUninitMemBuffer(words.size() * 4);
    auto *out = reinterpret_cast<uint32_t *>(swapped->getBufferStart());
    for (size_t i = 0; i < words.size(); ++i) out[i] = llvm::ByteSwap_32(words[i]);
    image.bytes = image.storage->adopt(std::move(swapped));
    words = std::span<const uint32_t>(out, words.size());
  }
  if (words[0] != SpvMagicNumber) return fail(ErrorCode::BadFormat, "invalid SPIR-V: no SPIR-V magic number");
  SpirvFacts facts;
  if (llvm::Error err = walkSpirv(words, facts)) return err;

  if (llvm::Error err = vouchFor(image, words, facts.extensions)) return err;

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
    // An export must be of something the module defines: listed, it would be a symbol of nothing.
    if (l.type != SpvLinkageTypeImport && !facts.functions.count(l.id) && !facts.variables.count(l.id))
      return fail(ErrorCode::BadFormat, "invalid SPIR-V: `" + llvm::Twine(l.name) + "` is exported (LinkageAttributes) " +
                                            "on id " + llvm::Twine(l.id) + ", which is no function or variable of the module");
    if (l.type == SpvLinkageTypeImport) {
      if (auto import = spirImport(l.name)) image.symbols.push_back(*import);
    } else if ((l.type == SpvLinkageTypeExport || l.type == SpvLinkageTypeLinkOnceODR) && !kernelNames.count(l.name)) {
      image.symbols.push_back(
          {l.name, facts.variables.count(l.id) ? SymbolKind::Variable : SymbolKind::Function});
    }
  }
  for (const auto &[id, name] : staticsOf(facts)) image.statics.push_back(image.storage->save(name));
  for (const auto &[id, specId] : facts.specIds) {
    auto name = facts.names.find(id);
    std::string fallback = "SpecId " + std::to_string(specId);
    image.setProperty(kSpecConstantsSet, name != facts.names.end() ? name->second : fallback, specId);
  }
  return llvm::Error::success();
}

llvm::Expected<std::vector<uint32_t>> spirvWords(Bytes bytes) {
  if (bytes.size() < 20 || bytes.size() % 4 != 0)
    return fail(ErrorCode::BadFormat, "invalid SPIR-V: size " + llvm::Twine(bytes.size()) + " is not a whole module");
  std::vector<uint32_t> words(bytes.size() / 4);
  std::memcpy(words.data(), bytes.data(), bytes.size());
  return words;
}

llvm::Expected<std::vector<uint32_t>> spirvWordsInHostOrder(Bytes bytes) {
  auto words = spirvWords(bytes);
  if (!words) return words.takeError();
  if ((*words)[0] == llvm::ByteSwap_32(SpvMagicNumber))
    for (uint32_t &word : *words) word = llvm::ByteSwap_32(word);
  if ((*words)[0] != SpvMagicNumber) return fail(ErrorCode::BadFormat, "invalid SPIR-V: no SPIR-V magic number");
  return words;
}

llvm::Expected<std::vector<std::pair<uint32_t, std::string>>> spirvStatics(Bytes bytes) {
  auto words = spirvWordsInHostOrder(bytes);
  if (!words) return words.takeError();
  SpirvFacts facts;
  if (llvm::Error err = walkSpirv(*words, facts)) return err;
  return staticsOf(facts);  // its names are copies: `words` go
}

llvm::Expected<std::string> spirvWithLocalDefinitions(Bytes bytes, std::span<const std::string_view> names) {
  auto read = spirvWordsInHostOrder(bytes);  // the result is in this host's byte order
  if (!read) return read.takeError();
  std::vector<uint32_t> &words = *read;
  // OpDecorate %target LinkageAttributes "name" Export of one of `names`: the decoration goes,
  // and the definition is the module's own. Its name goes too (OpName comes before the
  // decorations, hence two passes): the program it is linked into must not answer to it for
  // another image's definition (a variable the host reads by name). devdl's own reading alone: a
  // module the validator could not vouch for is edited so too, and its driver judges the result.
  std::set<uint32_t> ids;  // the definitions made local
  auto hiddenExport = [&](uint32_t opcode, std::span<const uint32_t> operands) {
    if (opcode != SpvOpDecorate || operands.size() < 3 || operands[1] != SpvDecorationLinkageAttributes) return false;
    size_t next = 0;
    auto name = literalAt(operands, 2, &next);
    return name && next < operands.size() &&
           (operands[next] == SpvLinkageTypeExport || operands[next] == SpvLinkageTypeLinkOnceODR) &&
           llvm::is_contained(names, *name);
  };
  if (llvm::Error err = forEachInstruction(words, [&](size_t, uint32_t opcode, std::span<const uint32_t> operands) {
        if (hiddenExport(opcode, operands)) ids.insert(operands[0]);
        return llvm::Error::success();
      }))
    return err;
  std::vector<uint32_t> out(words.begin(), words.begin() + 5);
  if (llvm::Error err = forEachInstruction(words, [&](size_t at, uint32_t opcode, std::span<const uint32_t> operands) {
        const bool named = opcode == SpvOpName && !operands.empty() && ids.count(operands[0]);
        if (!hiddenExport(opcode, operands) && !named)
          out.insert(out.end(), words.begin() + at, words.begin() + at + 1 + operands.size());
        return llvm::Error::success();
      }))
    return err;
  return std::string(reinterpret_cast<const char *>(out.data()), out.size() * 4);
}

namespace {

// What spirvCodeGraph reads in one pass: the names ids have, and what each function and
// module-scope value uses, by id.
struct GraphFacts {
  struct Function {
    uint32_t id;
    uint64_t size = 0;                    // bytes of its instructions
    std::vector<uint32_t> calls, uses;  // callees; every other id an operand names
  };
  std::unordered_map<uint32_t, std::string_view> entryNames, linkNames;
  std::unordered_set<uint32_t> imports;
  std::unordered_map<uint32_t, uint32_t> storage;  // module-scope variable -> storage class
  std::vector<uint32_t> variables;                 // module-scope, in order
  std::unordered_set<uint32_t> debugSets;          // extended instruction sets of debug information
  // Module-scope values (constants, variables' initializers) -> the ids they name: a function
  // pointer constant names its function.
  std::unordered_map<uint32_t, std::vector<uint32_t>> values;
  std::vector<Function> functions;
  bool inFunction = false;
};

std::string_view literalOf(const spv_parsed_instruction_t *inst, uint16_t operand) {
  const spv_parsed_operand_t &op = inst->operands[operand];
  const char *s = reinterpret_cast<const char *>(inst->words + op.offset);
  return std::string_view(s, strnlen(s, op.num_words * 4u));
}

spv_result_t onGraphInstruction(void *user, const spv_parsed_instruction_t *inst) {
  auto &f = *static_cast<GraphFacts *>(user);
  auto word = [&](uint16_t operand) { return inst->words[inst->operands[operand].offset]; };
  // The ids an instruction names besides its type and result (from operand `first` on).
  auto ids = [&](uint16_t first, std::vector<uint32_t> &out) {
    for (uint16_t i = first; i < inst->num_operands; ++i)
      if (inst->operands[i].type == SPV_OPERAND_TYPE_ID) out.push_back(word(i));
  };
  switch (inst->opcode) {
    case SpvOpEntryPoint:
      if (word(0) == SpvExecutionModelKernel) f.entryNames.emplace(word(1), literalOf(inst, 2));
      return SPV_SUCCESS;
    case SpvOpDecorate:
      if (word(1) == SpvDecorationLinkageAttributes && inst->num_operands >= 4) {
        f.linkNames.emplace(word(0), literalOf(inst, 2));
        if (word(3) == SpvLinkageTypeImport) f.imports.insert(word(0));
      }
      return SPV_SUCCESS;
    case SpvOpExtInstImport:
      // Debug information names every function (DebugFunction) and scopes all code: it neither
      // calls nor takes an address.
      if (literalOf(inst, 1).starts_with("OpenCL.DebugInfo") || literalOf(inst, 1).starts_with("NonSemantic."))
        f.debugSets.insert(inst->result_id);
      return SPV_SUCCESS;
    case SpvOpExtInst:
      if (inst->num_operands >= 3 && f.debugSets.count(word(2))) return SPV_SUCCESS;
      break;
    case SpvOpFunction:
      f.inFunction = true;
      f.functions.emplace_back().id = inst->result_id;
      break;
    case SpvOpFunctionEnd:
      f.inFunction = false;
      if (!f.functions.empty()) f.functions.back().size += inst->num_words * 4u;
      return SPV_SUCCESS;
    default:
      break;
  }
  if (!f.inFunction) {
    if (inst->opcode == SpvOpVariable) {
      f.storage.emplace(inst->result_id, word(2));
      f.variables.push_back(inst->result_id);
    }
    if (inst->result_id) ids(0, f.values[inst->result_id]);
    return SPV_SUCCESS;
  }
  GraphFacts::Function &function = f.functions.back();
  function.size += inst->num_words * 4u;
  if (inst->opcode == SpvOpFunctionCall && inst->num_operands >= 3) {
    function.calls.push_back(word(2));
    ids(3, function.uses);
  } else {
    ids(0, function.uses);
  }
  return SPV_SUCCESS;
}

// What spirvCodeGraph calls the ids of a module's facts: definitions by their names, uses by the
// definitions they stand for.
class GraphNames {
 public:
  // `local`: what the name of an id without one ends with, apart from every other module's.
  GraphNames(const GraphFacts &facts, std::string local) : facts_(facts), local_(std::move(local)) {
    for (const GraphFacts::Function &function : facts.functions) functionIds_.insert(function.id);
  }

  std::string nameOf(uint32_t id) const {
    if (auto it = facts_.entryNames.find(id); it != facts_.entryNames.end()) return std::string(it->second);
    if (auto it = facts_.linkNames.find(id); it != facts_.linkNames.end()) return std::string(it->second);
    return "%" + std::to_string(id) + local_;
  }

  bool isVariable(uint32_t id) const {
    auto it = facts_.storage.find(id);
    return it != facts_.storage.end() &&
           (it->second == SpvStorageClassCrossWorkgroup || it->second == SpvStorageClassGeneric);
  }

  // The names `id` stands for as a use: a variable or a function (its address taken), or those a
  // module-scope value it is names, through constants made of constants.
  void addUses(uint32_t id, std::vector<std::string> &refers, std::unordered_set<uint32_t> &seen) const {
    std::vector<uint32_t> stack{id};
    while (!stack.empty()) {
      const uint32_t next = stack.back();
      stack.pop_back();
      if (!seen.insert(next).second) continue;
      if (isVariable(next) || functionIds_.count(next)) {
        refers.push_back(nameOf(next));
      } else if (!facts_.storage.count(next)) {
        if (auto it = facts_.values.find(next); it != facts_.values.end())
          stack.insert(stack.end(), it->second.begin(), it->second.end());
      }
    }
  }

 private:
  const GraphFacts &facts_;
  std::string local_;
  std::unordered_set<uint32_t> functionIds_;
};

}  // namespace

llvm::Expected<CodeGraph> spirvCodeGraph(Bytes bytes) {
  auto read = spirvWords(bytes);
  if (!read) return read.takeError();
  const std::vector<uint32_t> &words = *read;
  // The names read are views of these words: the parser hands a module of the other byte order
  // over in copies.
  if (words[0] != SpvMagicNumber)
    return fail(ErrorCode::BadFormat, "SPIR-V of the other byte order, or no SPIR-V: its graph is not read");
  GraphFacts facts;
  spirv::Context context;
  if (spirv::Diagnostic parsing; spvBinaryParse(context.get(), &facts, words.data(), words.size(), nullptr,
                                                onGraphInstruction, parsing.out()) != SPV_SUCCESS)
    return fail(ErrorCode::BadFormat, "invalid SPIR-V: " + parsing.text());

  const GraphNames names(facts, "@" + llvm::utohexstr(xxh3::hash64(bytes.data(), bytes.size())));
  CodeGraph graph;
  for (const GraphFacts::Function &function : facts.functions) {
    if (facts.imports.count(function.id)) continue;  // a declaration: another module defines it
    CodeGraph::Definition &d = graph.definitions.emplace_back();
    d.name = names.nameOf(function.id);
    d.kind = facts.entryNames.count(function.id) ? SymbolKind::Kernel : SymbolKind::Function;
    d.size = function.size;
    for (uint32_t callee : function.calls) d.calls.push_back(names.nameOf(callee));
    std::unordered_set<uint32_t> seen;
    for (uint32_t id : function.uses) names.addUses(id, d.refers, seen);
  }
  for (uint32_t id : facts.variables) {
    if (!names.isVariable(id) || facts.imports.count(id)) continue;
    CodeGraph::Definition &d = graph.definitions.emplace_back();
    d.name = names.nameOf(id);
    d.kind = SymbolKind::Variable;
    std::unordered_set<uint32_t> seen{id};
    for (uint32_t value : facts.values[id]) names.addUses(value, d.refers, seen);
  }
  return graph;
}

}  // namespace devdl::readers
