// Variables reached through cells (image/instance_cells.h): the SPIR-V rewrite. Two passes of
// SPIRV-Tools' parser: the first finds the variables by their linkage names, the pointer types
// there are, and which functions use which variable; the second writes the module with each
// variable's OpVariable replaced by its cell's (the same id, so that decorations and entry points
// still name it), the cells after every other global, and a load of each cell at the top of
// every function that uses it, whose result stands for the variable there.
#include "image/instance_cells.h"
#include "image/local_definitions.h"
#include "image/readers.h"

#include "support/error.h"
#include "support/spirv_tools.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/SwapByteOrder.h>

#include <spirv/unified1/spirv.h>

#include <cstring>
#include <initializer_list>
#include <map>
#include <set>
#include <vector>

namespace devdl {

std::string instanceCellName(std::string_view name) { return std::string(kInstanceCellPrefix) + std::string(name); }

std::string interposedCellName(std::string_view name, size_t position) {
  return instanceCellName(name) + "$" + std::to_string(position);
}

namespace {

std::string_view literal(const spv_parsed_instruction_t *inst, const spv_parsed_operand_t &operand) {
  const char *text = reinterpret_cast<const char *>(inst->words + operand.offset);
  return std::string_view(text, strnlen(text, operand.num_words * 4u));
}

// A literal string as SPIR-V words: its bytes, a NUL, zeros to the word's end.
std::vector<uint32_t> literalWords(std::string_view text) {
  std::vector<uint32_t> words(text.size() / 4 + 1, 0);
  std::memcpy(words.data(), text.data(), text.size());
  return words;
}

struct Rewrite {
  std::span<const std::string_view> names;
  std::span<const std::string> cells;  // parallel to names; empty: instanceCellName
  // The first pass's findings.
  uint32_t addressing = SpvAddressingModelPhysical64;
  std::map<uint32_t, std::string_view> variables;       // variable id -> its linkage name, of `names`
  std::map<uint32_t, std::string> cellNames;            // variable id -> its cell's name
  std::map<uint32_t, SpvLinkageType> linkage;           // variable id -> Export or Import
  std::map<uint32_t, uint32_t> pointerType;             // variable id -> its type (a pointer)
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> pointers;  // (storage, pointee) -> OpTypePointer
  std::vector<std::set<uint32_t>> functionUses;         // by function: the variables it uses
  std::map<uint32_t, uint32_t> heldBy;                  // variable -> an instruction at module scope naming it
  // Variables of the module's own: CrossWorkgroup ones, those with a linkage, those read-only
  // (Constant), and the names they have, to tell a writable one the module does not export.
  std::set<uint32_t> crossWorkgroup, linked, readOnly;
  std::map<uint32_t, std::string_view> idNames;
  // The second pass's state.
  bool writing = false;
  uint32_t bound = 0;
  std::vector<uint32_t> out;
  bool globalsWritten = false;
  bool annotations = false;   // the first decoration was met
  std::set<uint32_t> named;   // the cells named
  size_t function = 0;                    // functions seen, in the second pass
  std::map<uint32_t, uint32_t> inFunction;  // variable -> the load standing for it in this function
  bool entryBlock = false, loaded = false;
};

bool isId(const spv_parsed_operand_t &operand) { return operand.type == SPV_OPERAND_TYPE_ID; }

void collect(Rewrite &r, const spv_parsed_instruction_t *inst) {
  const bool inFunctions = !r.functionUses.empty();
  switch (inst->opcode) {
    case SpvOpMemoryModel: r.addressing = inst->words[1]; return;
    case SpvOpDecorate:
      if (inst->num_operands >= 2 && inst->words[inst->operands[1].offset] == SpvDecorationConstant)
        r.readOnly.insert(inst->words[1]);
      if (inst->num_operands >= 4 && inst->words[inst->operands[1].offset] == SpvDecorationLinkageAttributes) {
        r.linked.insert(inst->words[1]);
        const std::string_view name = literal(inst, inst->operands[2]);
        if (auto it = llvm::find(r.names, name); it != r.names.end()) {
          r.variables[inst->words[1]] = *it;
          const auto k = static_cast<size_t>(it - r.names.begin());
          r.cellNames[inst->words[1]] = r.cells.empty() ? instanceCellName(*it) : r.cells[k];
          r.linkage[inst->words[1]] = static_cast<SpvLinkageType>(inst->words[inst->operands[3].offset]);
        }
      }
      return;
    case SpvOpName:
      if (inst->num_operands >= 2) r.idNames[inst->words[1]] = literal(inst, inst->operands[1]);
      return;
    case SpvOpEntryPoint:
    case SpvOpMemberDecorate:
    case SpvOpDecorateId:
    case SpvOpDecorateString: return;  // they name the variable, and keep naming its cell
    case SpvOpTypePointer: r.pointers[{inst->words[2], inst->words[3]}] = inst->words[1]; return;
    case SpvOpFunction: r.functionUses.emplace_back(); return;
    default: break;
  }
  // Program-scope memory only: a builtin's Input variable is the device's, never an instance.
  const bool memory = inst->opcode == SpvOpVariable && (inst->words[3] == SpvStorageClassCrossWorkgroup ||
                                                        inst->words[3] == SpvStorageClassUniformConstant);
  if (memory && !inFunctions && r.variables.count(inst->result_id)) r.pointerType[inst->result_id] = inst->type_id;
  if (inst->opcode == SpvOpVariable && !inFunctions && inst->words[3] == SpvStorageClassCrossWorkgroup)
    r.crossWorkgroup.insert(inst->result_id);
  // Debug information may name the variable (its cell then): anything else at module scope that
  // names it holds its address, which only the instance has.
  const bool debug = inst->opcode == SpvOpExtInst && !inFunctions;
  for (uint16_t i = 0; i < inst->num_operands; ++i) {
    const uint32_t id = inst->words[inst->operands[i].offset];
    if (!isId(inst->operands[i]) || !r.variables.count(id) || debug) continue;
    if (!inFunctions || inst->opcode == SpvOpVariable)
      r.heldBy.try_emplace(id, inst->opcode);
    else
      r.functionUses.back().insert(id);
  }
}

void emit(Rewrite &r, const uint32_t *words, size_t count) { r.out.insert(r.out.end(), words, words + count); }

// The cells, after every other global: a pointer type to each variable's type where the module
// has none, a null initializer for those defined here, and the cell under the variable's id.
void writeCells(Rewrite &r) {
  r.globalsWritten = true;
  for (const auto &[variable, type] : r.pointerType) {
    uint32_t cellType;
    if (auto it = r.pointers.find({SpvStorageClassCrossWorkgroup, type}); it != r.pointers.end()) {
      cellType = it->second;
    } else {
      cellType = r.bound++;
      r.pointers[{SpvStorageClassCrossWorkgroup, type}] = cellType;
      const uint32_t pointer[] = {4u << 16 | SpvOpTypePointer, cellType, SpvStorageClassCrossWorkgroup, type};
      emit(r, pointer, 4);
    }
    if (r.linkage[variable] == SpvLinkageTypeImport) {
      const uint32_t cell[] = {4u << 16 | SpvOpVariable, cellType, variable, SpvStorageClassCrossWorkgroup};
      emit(r, cell, 4);
      continue;
    }
    const uint32_t null = r.bound++;
    const uint32_t constant[] = {3u << 16 | SpvOpConstantNull, type, null};
    const uint32_t cell[] = {5u << 16 | SpvOpVariable, cellType, variable, SpvStorageClassCrossWorkgroup, null};
    emit(r, constant, 3);
    emit(r, cell, 5);
  }
}

void writeName(Rewrite &r, uint32_t variable) {
  if (!r.named.insert(variable).second) return;
  const std::vector<uint32_t> name = literalWords(r.cellNames[variable]);
  r.out.push_back(static_cast<uint32_t>(2 + name.size()) << 16 | SpvOpName);
  r.out.push_back(variable);
  r.out.insert(r.out.end(), name.begin(), name.end());
}

// The names of the cells whose variables had none, before the first decoration (names come first).
void writeNames(Rewrite &r) {
  if (r.annotations) return;
  r.annotations = true;
  for (const auto &[variable, name] : r.variables) writeName(r, variable);
}

// The cells' part in an instruction of the second pass, before it is written: their names and
// linkage decorations in the variables', their definitions after the globals, and the state at a
// function's start. True where that replaced or dropped the instruction.
bool replacedForCells(Rewrite &r, const spv_parsed_instruction_t *inst) {
  const uint32_t target = inst->num_words >= 2 ? inst->words[1] : 0;
  switch (inst->opcode) {
    case SpvOpName:
      // The cell's name, by which a program that moves its variables (PoCL's) finds it once the
      // link has dropped the linkage.
      if (r.variables.count(target)) {
        writeName(r, target);
        return true;
      }
      break;
    case SpvOpDecorateId:
    case SpvOpDecorateString:
    case SpvOpGroupDecorate:
    case SpvOpDecorationGroup:
    case SpvOpMemberDecorate:
      if (r.variables.count(target)) return true;  // the variable's decorations are not the cell's
      writeNames(r);
      break;
    case SpvOpDecorate:
      writeNames(r);
      if (!r.variables.count(target)) break;
      if (inst->words[2] == SpvDecorationLinkageAttributes) {  // the cell's name, the variable's linkage
        const std::vector<uint32_t> name = literalWords(r.cellNames[target]);
        r.out.push_back(static_cast<uint32_t>(4 + name.size()) << 16 | SpvOpDecorate);
        r.out.insert(r.out.end(), {target, uint32_t(SpvDecorationLinkageAttributes)});
        r.out.insert(r.out.end(), name.begin(), name.end());
        r.out.push_back(r.linkage[target]);
      }
      return true;
    case SpvOpVariable:
      if (r.function == 0 && r.variables.count(inst->result_id)) return true;  // its cell comes after the globals
      break;
    case SpvOpFunction:
      if (!r.globalsWritten) writeCells(r);
      ++r.function;
      r.inFunction.clear();
      r.entryBlock = r.loaded = false;
      break;
    case SpvOpLabel:
      r.entryBlock = !r.loaded;
      break;
    default: break;
  }
  return false;
}

// At the first instruction of the entry block that is not one of its variables: the loads.
void writeLoads(Rewrite &r, const spv_parsed_instruction_t *inst) {
  const bool leading = inst->opcode == SpvOpLabel || inst->opcode == SpvOpVariable || inst->opcode == SpvOpLine ||
                       inst->opcode == SpvOpNoLine;
  if (!r.entryBlock || r.loaded || leading) return;
  r.loaded = true;
  const uint32_t align = r.addressing == SpvAddressingModelPhysical64 ? 8 : 4;
  for (uint32_t variable : r.functionUses[r.function - 1]) {
    const uint32_t address = r.bound++;
    r.inFunction[variable] = address;
    const uint32_t load[] = {6u << 16 | SpvOpLoad, r.pointerType[variable], address, variable,
                             SpvMemoryAccessAlignedMask, align};
    emit(r, load, 6);
  }
}

// The instruction, each variable it names in a function replaced by the load that stands for it.
void writeWithLoads(Rewrite &r, const spv_parsed_instruction_t *inst) {
  const size_t start = r.out.size();
  emit(r, inst->words, inst->num_words);
  if (r.inFunction.empty()) return;
  for (uint16_t i = 0; i < inst->num_operands; ++i) {
    if (!isId(inst->operands[i])) continue;
    uint32_t &word = r.out[start + inst->operands[i].offset];
    if (auto it = r.inFunction.find(word); it != r.inFunction.end()) word = it->second;
  }
}

// The second pass: one instruction written as the module with its cells has it.
void rewrite(Rewrite &r, const spv_parsed_instruction_t *inst) {
  if (replacedForCells(r, inst)) return;
  writeLoads(r, inst);
  writeWithLoads(r, inst);
}

// Statics exported: the module's statics as the reader names them (readers::spirvStatics); the
// first pass finds whether the module has the Linkage capability and which ids have names; the
// second gives each static its exported name (OpName and a LinkageAttributes decoration, with the
// Linkage capability where the module has none).
struct Export {
  // The first pass's findings.
  bool linkage = false;
  std::set<uint32_t> named;
  std::map<uint32_t, std::string_view> targets;  // variable id -> its exported name
  // The second pass's state.
  bool writing = false;
  std::vector<uint32_t> out;
  bool capabilityWritten = false, namesWritten = false, decorationsWritten = false;
};

void collectStatics(Export &e, const spv_parsed_instruction_t *inst) {
  if (inst->opcode == SpvOpCapability) e.linkage |= inst->words[1] == SpvCapabilityLinkage;
  if (inst->opcode == SpvOpName && inst->num_words >= 2) e.named.insert(inst->words[1]);
}

void writeWords(Export &e, uint32_t opcode, std::initializer_list<uint32_t> head, std::string_view text = {},
                std::initializer_list<uint32_t> tail = {}) {
  const std::vector<uint32_t> literalText = text.empty() ? std::vector<uint32_t>() : literalWords(text);
  e.out.push_back(static_cast<uint32_t>(1 + head.size() + literalText.size() + tail.size()) << 16 | opcode);
  e.out.insert(e.out.end(), head);
  e.out.insert(e.out.end(), literalText.begin(), literalText.end());
  e.out.insert(e.out.end(), tail);
}

void writeExported(Export &e, const spv_parsed_instruction_t *inst) {
  const SpvOp op = static_cast<SpvOp>(inst->opcode);
  // The module's layout: capabilities; extensions, imports, the memory model, entry points and
  // execution modes; debug names; then annotations, and everything else.
  const bool preamble = op == SpvOpCapability || op == SpvOpExtension || op == SpvOpExtInstImport ||
                        op == SpvOpMemoryModel || op == SpvOpEntryPoint || op == SpvOpExecutionMode ||
                        op == SpvOpExecutionModeId;
  const bool debug = op == SpvOpString || op == SpvOpSourceExtension || op == SpvOpSource ||
                     op == SpvOpSourceContinued || op == SpvOpName || op == SpvOpMemberName;
  if (op != SpvOpCapability && !e.capabilityWritten) {
    e.capabilityWritten = true;
    if (!e.linkage) writeWords(e, SpvOpCapability, {SpvCapabilityLinkage});
  }
  if (!preamble && !debug && !e.namesWritten) {  // names the variables had none of
    e.namesWritten = true;
    for (const auto &[id, name] : e.targets)
      if (!e.named.count(id)) writeWords(e, SpvOpName, {id}, name);
  }
  if (!preamble && !debug && op != SpvOpModuleProcessed && !e.decorationsWritten) {
    e.decorationsWritten = true;
    for (const auto &[id, name] : e.targets)
      writeWords(e, SpvOpDecorate, {id, SpvDecorationLinkageAttributes}, name, {SpvLinkageTypeExport});
  }
  if (op == SpvOpName && e.targets.count(inst->words[1])) {
    writeWords(e, SpvOpName, {inst->words[1]}, e.targets[inst->words[1]]);
    return;
  }
  e.out.insert(e.out.end(), inst->words, inst->words + inst->num_words);
}

}  // namespace

llvm::Expected<std::string> readers::spirvWithStaticsExported(Bytes bytes, std::span<const std::string_view> names,
                                                             std::span<const std::string> exported) {
  auto read = readers::spirvWords(bytes);
  if (!read) return read.takeError();
  std::vector<uint32_t> &words = *read;
  Export e;
  auto visit = [](void *user, const spv_parsed_instruction_t *inst) -> spv_result_t {
    auto &e = *static_cast<Export *>(user);
    e.writing ? writeExported(e, inst) : collectStatics(e, inst);
    return SPV_SUCCESS;
  };
  spirv::Context context;
  auto parse = [&]() -> llvm::Error {
    if (spirv::Diagnostic parsing;
        spvBinaryParse(context.get(), &e, words.data(), words.size(), nullptr, visit, parsing.out()) != SPV_SUCCESS)
      return fail(ErrorCode::BadFormat, "invalid SPIR-V: " + parsing.text());
    return llvm::Error::success();
  };
  if (llvm::Error err = parse()) return err;
  auto statics = readers::spirvStatics(bytes);
  if (!statics) return statics.takeError();
  for (size_t k = 0; k < names.size(); ++k) {
    auto it = llvm::find_if(*statics, [&](const auto &s) { return s.second == names[k]; });
    if (it == statics->end())
      return fail(ErrorCode::BadFormat, "`" + std::string(names[k]) + "` is no static variable of the module");
    e.targets[it->first] = exported[k];
  }
  if (e.targets.empty()) return std::string(bytes.begin(), bytes.end());
  e.out.assign(words.begin(), words.begin() + 5);
  if (e.out[0] != SpvMagicNumber)
    for (uint32_t &word : e.out) word = llvm::ByteSwap_32(word);
  e.writing = true;
  if (llvm::Error err = parse()) return err;
  return std::string(reinterpret_cast<const char *>(e.out.data()), e.out.size() * 4);
}

llvm::Expected<std::string> readers::spirvWithInstancesElsewhere(Bytes bytes, std::span<const std::string_view> names,
                                                                std::span<const std::string> cells) {
  auto read = readers::spirvWords(bytes);
  if (!read) return read.takeError();
  std::vector<uint32_t> &words = *read;
  Rewrite r;
  r.names = names;
  r.cells = cells;
  auto visit = [](void *user, const spv_parsed_instruction_t *inst) -> spv_result_t {
    auto &r = *static_cast<Rewrite *>(user);
    r.writing ? rewrite(r, inst) : collect(r, inst);
    return SPV_SUCCESS;
  };
  spirv::Context context;
  auto parse = [&]() -> llvm::Error {
    if (spirv::Diagnostic parsing;
        spvBinaryParse(context.get(), &r, words.data(), words.size(), nullptr, visit, parsing.out()) != SPV_SUCCESS)
      return fail(ErrorCode::BadFormat, "invalid SPIR-V: " + parsing.text());
    return llvm::Error::success();
  };
  if (llvm::Error err = parse()) return err;
  // Only variables defined or imported at module scope are rewritten (not a function of the name).
  for (auto it = r.variables.begin(); it != r.variables.end();)
    it = r.pointerType.count(it->first) ? std::next(it) : r.variables.erase(it);
  for (std::set<uint32_t> &uses : r.functionUses) std::erase_if(uses, [&](uint32_t id) { return !r.variables.count(id); });
  for (const auto &[variable, opcode] : r.heldBy)
    if (r.variables.count(variable))
      return fail(ErrorCode::Unsupported, "`" + std::string(r.variables[variable]) +
                                              "`'s address is held by a constant or another variable's initializer "
                                              "(SPIR-V opcode " + std::to_string(opcode) +
                                              "), which cannot hold the address of an instance elsewhere");
  if (r.pointerType.empty()) return std::string(bytes.begin(), bytes.end());  // it names none of them
  // A module whose variable's instance is elsewhere has all its variables' there: one it keeps
  // to itself and may write (not decorated Constant, as OpenCL C's `const` is) would be a second
  // instance here, which devdl cannot reach yet.
  const bool defines = llvm::any_of(r.linkage, [](const auto &l) { return l.second != SpvLinkageTypeImport; });
  for (uint32_t variable : r.crossWorkgroup)
    if (defines && !r.linked.count(variable) && !r.readOnly.count(variable))
      return fail(ErrorCode::Unsupported,
                  "`" + std::string(r.idNames.count(variable) ? r.idNames[variable] : "a variable") +
                      "`, a variable of its own that it does not export, would have a second instance in the "
                      "program that reaches `" + std::string(r.variables.begin()->second) +
                      "` in another: devdl reaches only exported variables so");
  if (r.addressing != SpvAddressingModelPhysical64)
    return fail(ErrorCode::Unsupported, "`" + std::string(r.variables.begin()->second) +
                                            "`: the module's addresses are not of 64 bits, as the cell's are");
  // The parser hands each instruction over in this host's byte order: the header too.
  r.out.assign(words.begin(), words.begin() + 5);
  if (r.out[0] != SpvMagicNumber)
    for (uint32_t &word : r.out) word = llvm::ByteSwap_32(word);
  r.bound = r.out[3];
  r.writing = true;
  if (llvm::Error err = parse()) return err;
  if (!r.globalsWritten) writeCells(r);  // a module of no functions
  r.out[3] = r.bound;
  return std::string(reinterpret_cast<const char *>(r.out.data()), r.out.size() * 4);
}

llvm::Expected<std::string> withInstancesElsewhere(Bytes bytes, ImageFormat format,
                                                   std::span<const std::string_view> names,
                                                   std::span<const std::string> cells) {
  if (format == ImageFormat::SpirV) return readers::spirvWithInstancesElsewhere(bytes, names, cells);
  if (format == ImageFormat::Ptx) return readers::ptxWithInstancesElsewhere(bytes, names, cells);
  return fail(ErrorCode::Unsupported, "`" + std::string(names.empty() ? "" : names.front()) +
                                          "` cannot be reached in another program from an image of format " +
                                          std::string(formatName(format)) + ": devdl rewrites SPIR-V and PTX for that");
}

std::string staticExportName(std::string_view name, uint64_t imageHash) {
  return std::string(kStaticPrefix) + llvm::utohexstr(imageHash, /*LowerCase=*/true, /*Width=*/16) + "_" +
         std::string(name);
}

llvm::Expected<std::string> withStaticsExported(Bytes bytes, ImageFormat format, std::span<const std::string_view> names,
                                                std::span<const std::string> exported) {
  if (format == ImageFormat::SpirV) return readers::spirvWithStaticsExported(bytes, names, exported);
  if (format == ImageFormat::Ptx) return readers::ptxWithStaticsExported(bytes, names, exported);
  return std::string(bytes.begin(), bytes.end());
}

llvm::Expected<Bytes> editedForLink(Bytes bytes, ImageFormat format, std::span<const std::string_view> statics,
                                    std::span<const std::string> exported, std::span<const std::string_view> interposed,
                                    std::span<const std::string_view> elsewhere,
                                    std::span<const std::string_view> interposedElsewhere, size_t position,
                                    std::deque<std::string> &edits) {
  if (!exported.empty() && (format == ImageFormat::SpirV || format == ImageFormat::Ptx)) {
    auto edited = withStaticsExported(bytes, format, statics, exported);
    if (!edited) return edited.takeError();
    bytes = asBytes(edits.emplace_back(std::move(*edited)));
  }
  if (!elsewhere.empty() || !interposedElsewhere.empty()) {
    std::vector<std::string_view> names(elsewhere.begin(), elsewhere.end());
    std::vector<std::string> cells;
    for (std::string_view name : elsewhere) cells.push_back(instanceCellName(name));
    for (std::string_view name : interposedElsewhere) {
      names.push_back(name);
      cells.push_back(interposedCellName(name, position));
    }
    auto edited = withInstancesElsewhere(bytes, format, names, cells);
    if (!edited) return edited.takeError();
    bytes = asBytes(edits.emplace_back(std::move(*edited)));
  }
  if (!interposed.empty()) {
    auto edited = withLocalDefinitions(bytes, format, interposed);
    if (!edited) return edited.takeError();
    bytes = asBytes(edits.emplace_back(std::move(*edited)));
  }
  return bytes;
}

}  // namespace devdl
