#include "backend/spirv_link.h"
#include "support/error.h"
#include "support/spirv_tools.h"

#if DEVDL_HAVE_SPIRV_TRANSLATOR
#include <LLVMSPIRVLib/LLVMSPIRVLib.h>
#include <llvm/Analysis/ConstantFolding.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#endif
#include <llvm/ADT/STLExtras.h>
#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>
#include <spirv-tools/libspirv.h>
#include <spirv-tools/linker.hpp>
#include <spirv/unified1/spirv.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

namespace devdl::backend {

namespace {

constexpr size_t kVersionWord = 1;
constexpr size_t kHeaderWords = 5;
constexpr uint32_t kMaxSpecId = 0xffff;

// Calls visit(offset, word count) for each instruction after the header, as the word counts lay
// them out, until it returns false. One cut short by the module's end stops the walk: a parser
// refuses the module later.
template <typename Visit>
void walkInstructions(std::span<const uint32_t> words, Visit visit) {
  for (size_t at = kHeaderWords, count; at < words.size() && (count = words[at] >> 16) && count <= words.size() - at;
       at += count)
    if (!visit(at, count)) return;
}

// `words` without the instructions `drop(offset, word count)` picks. What the walk stopped at is
// kept, for a parser to refuse.
template <typename Drop>
std::vector<uint32_t> withoutInstructions(std::span<const uint32_t> words, Drop drop) {
  size_t end = std::min(words.size(), kHeaderWords);
  std::vector<uint32_t> kept(words.begin(), words.begin() + end);
  walkInstructions(words, [&](size_t at, size_t count) {
    end = at + count;
    if (!drop(at, count)) kept.insert(kept.end(), words.begin() + at, words.begin() + at + count);
    return true;
  });
  kept.insert(kept.end(), words.begin() + end, words.end());
  return kept;
}

}  // namespace

// The linker leaves each module's variable for a builtin (get_global_id reads
// GlobalInvocationId) in the linked module, as it never pairs builtins by their linkage: two
// variables for one builtin, which the translator refuses and PoCL crashes on. This keeps the
// first variable of each builtin, points every use of the others at it, and drops them with
// their names and decorations (operands found by spvBinaryParse, so no literal is touched).
llvm::Expected<std::vector<uint32_t>> mergeBuiltinVariables(std::vector<uint32_t> words) {
  struct Scan {
    std::set<uint32_t> variables;
    std::vector<std::pair<uint32_t, uint32_t>> builtins;  // (variable or other id, builtin)
  } scan;
  auto collect = [](void *user, const spv_parsed_instruction_t *inst) -> spv_result_t {
    auto &scan = *static_cast<Scan *>(user);
    if (inst->opcode == SpvOpVariable) scan.variables.insert(inst->result_id);
    if (inst->opcode == SpvOpDecorate && inst->num_words >= 4 && inst->words[2] == SpvDecorationBuiltIn)
      scan.builtins.emplace_back(inst->words[1], inst->words[3]);
    return SPV_SUCCESS;
  };
  spirv::Context context;
  auto failed = [](const char *what, const spirv::Diagnostic &diagnostic) {
    return fail(ErrorCode::Unsupported, llvm::Twine("linked SPIR-V: ") + what + ": " + diagnostic.text());
  };
  if (spirv::Diagnostic diagnostic; spvBinaryParse(context.get(), &scan, words.data(), words.size(), nullptr, collect,
                                                   diagnostic.out()) != SPV_SUCCESS)
    return failed("cannot parse", diagnostic);
  struct Rewrite {
    std::map<uint32_t, uint32_t> replace;  // duplicate variable -> the one kept
    std::vector<uint32_t> out;
  } rewrite;
  std::map<uint32_t, uint32_t> kept;  // builtin -> variable
  for (const auto &[id, builtin] : scan.builtins)
    if (scan.variables.count(id)) {
      auto [it, first] = kept.try_emplace(builtin, id);
      if (!first) rewrite.replace[id] = it->second;
    }
  if (rewrite.replace.empty()) return words;
  rewrite.out.assign(words.begin(), words.begin() + kHeaderWords);
  auto emit = [](void *user, const spv_parsed_instruction_t *inst) -> spv_result_t {
    auto &rewrite = *static_cast<Rewrite *>(user);
    const bool aboutDuplicate = (inst->opcode == SpvOpName || inst->opcode == SpvOpDecorate) && inst->num_words >= 2 &&
                                rewrite.replace.count(inst->words[1]);
    if (aboutDuplicate || (inst->opcode == SpvOpVariable && rewrite.replace.count(inst->result_id))) return SPV_SUCCESS;
    const size_t start = rewrite.out.size();
    rewrite.out.insert(rewrite.out.end(), inst->words, inst->words + inst->num_words);
    std::set<uint32_t> interface;  // an entry point lists each variable once
    for (uint16_t i = 0; i < inst->num_operands; ++i) {
      const spv_parsed_operand_t &operand = inst->operands[i];
      if (operand.type != SPV_OPERAND_TYPE_ID) continue;
      uint32_t &word = rewrite.out[start + operand.offset];
      if (auto it = rewrite.replace.find(word); it != rewrite.replace.end()) word = it->second;
      if (inst->opcode == SpvOpEntryPoint && i >= 3 && !interface.insert(word).second) word = 0;  // dropped below
    }
    if (inst->opcode == SpvOpEntryPoint) {
      // Operands from the fourth on are the interface: drop the repeats (marked 0, no valid id).
      const size_t interfaceStart = start + inst->operands[std::min<uint16_t>(3, inst->num_operands - 1)].offset;
      if (inst->num_operands > 3)
        rewrite.out.erase(std::remove(rewrite.out.begin() + static_cast<std::ptrdiff_t>(interfaceStart), rewrite.out.end(), 0u),
                          rewrite.out.end());
      rewrite.out[start] = static_cast<uint32_t>(rewrite.out.size() - start) << 16 | SpvOpEntryPoint;
    }
    return SPV_SUCCESS;
  };
  if (spirv::Diagnostic diagnostic; spvBinaryParse(context.get(), &rewrite, words.data(), words.size(), nullptr, emit,
                                                   diagnostic.out()) != SPV_SUCCESS)
    return failed("cannot rewrite", diagnostic);
  return std::move(rewrite.out);
}

void unnameLocalVariables(std::vector<uint32_t> &words) {
  std::set<uint32_t> variables, linked;
  bool inFunctions = false;
  walkInstructions(words, [&](size_t at, size_t count) {
    const uint32_t opcode = words[at] & 0xffff;
    inFunctions |= opcode == SpvOpFunction;
    if (opcode == SpvOpVariable && count >= 4 && !inFunctions && words[at + 3] == SpvStorageClassCrossWorkgroup)
      variables.insert(words[at + 2]);
    if (opcode == SpvOpDecorate && count >= 3 && words[at + 2] == SpvDecorationLinkageAttributes)
      linked.insert(words[at + 1]);
    return !inFunctions;
  });
  words = withoutInstructions(words, [&](size_t at, size_t count) {
    return (words[at] & 0xffff) == SpvOpName && count >= 2 && variables.count(words[at + 1]) &&
           !linked.count(words[at + 1]);
  });
}

llvm::Expected<std::vector<uint32_t>> linkSpirv(std::span<const DeviceImage *const> images,
                                                std::span<const std::string> labels, bool keepExports) {
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
  for (auto &words : modules) {
    words[kVersionWord] = version;
    unnameLocalVariables(words);
  }
  // Each module's specialization constants get SpecIds of their own (see linkedSpecId): two
  // images may both use SpecId 0, and one value must not set both.
  for (size_t i = 1; i < modules.size(); ++i) {
    std::vector<uint32_t> &words = modules[i];
    uint32_t tooLarge = 0;
    walkInstructions(words, [&](size_t at, size_t count) {
      if ((words[at] & 0xffff) != SpvOpDecorate || count != 4 || words[at + 2] != SpvDecorationSpecId) return true;
      if (words[at + 3] > kMaxSpecId) {
        tooLarge = words[at + 3];
        return false;
      }
      words[at + 3] = linkedSpecId(i, words[at + 3]);
      return true;
    });
    if (tooLarge)
      return inImage(fail(ErrorCode::Unsupported, "SpecId " + std::to_string(tooLarge) +
                                                      " is too large to link with other images (at most " +
                                                      std::to_string(kMaxSpecId) + ")"),
                     labels[i]);
  }

  // The linker reports through the consumer; the message names the module by its position.
  std::string messages;
  spvtools::Context context(SPV_ENV_UNIVERSAL_1_6);
  context.SetMessageConsumer([&](spv_message_level_t, const char *, const spv_position_t &, const char *message) {
    if (!messages.empty()) messages += "; ";
    messages += message;
  });
  spvtools::LinkerOptions options;
  options.SetVerifyIds(true);
  options.SetCreateLibrary(keepExports);
  std::vector<uint32_t> linked;
  if (spvtools::Link(context, modules, &linked, options) != SPV_SUCCESS) {
    std::string names;
    for (size_t i = 0; i < labels.size(); ++i) names += (i ? ", " : "") + std::to_string(i + 1) + " = " + labels[i];
    return fail(ErrorCode::Unresolved, "SPIR-V link failed: " + messages + " (modules " + names + ")");
  }
  auto merged = mergeBuiltinVariables(std::move(linked));
  if (!merged) return merged.takeError();
  // Valid inputs can still link into an invalid module (an import's type that differs from its
  // definition's, which the linker does not compare everywhere): nothing downstream is given it.
  // A module without kernels (a library linked for its variables) is valid only as a library: it
  // is validated as one, with the Linkage capability the linker took away.
  bool kernels = false;
  walkInstructions(*merged, [&](size_t at, size_t) {
    kernels = ((*merged)[at] & 0xffff) == SpvOpEntryPoint;
    return !kernels;
  });
  std::vector<uint32_t> asLibrary;
  if (!kernels && !keepExports) {
    asLibrary = *merged;
    asLibrary.insert(asLibrary.begin() + kHeaderWords, {2u << 16 | SpvOpCapability, SpvCapabilityLinkage});
  }
  const std::vector<uint32_t> &checked = asLibrary.empty() ? *merged : asLibrary;
  spirv::Context validator;
  spv_const_binary_t binary{checked.data(), checked.size()};
  if (spirv::Diagnostic diagnostic; spvValidate(validator.get(), &binary, diagnostic.out()) != SPV_SUCCESS) {
    std::string others;
    for (size_t i = 1; i < labels.size(); ++i) others += (i > 1 ? ", " : " (with ") + labels[i];
    return inImage(fail(ErrorCode::BadFormat, "the module it links into" + others + (others.empty() ? "" : ")") +
                                                  " is invalid SPIR-V: " + diagnostic.text()),
                   labels.front());
  }
  return merged;
}

uint32_t linkedSpecId(size_t module, uint32_t specId) { return static_cast<uint32_t>(module) << 16 | specId; }

#if DEVDL_HAVE_SPIRV_TRANSLATOR
namespace {

bool isAccessChain(uint32_t opcode) {
  return opcode == SpvOpAccessChain || opcode == SpvOpInBoundsAccessChain || opcode == SpvOpPtrAccessChain ||
         opcode == SpvOpInBoundsPtrAccessChain;
}

std::string versionText(uint32_t version) {
  return std::to_string(version >> 16 & 0xff) + "." + std::to_string(version >> 8 & 0xff);
}

// What the SPIR-V to SPIR translator (15) exits, asserts or crashes on in modules the validator
// accepts, each found by fuzz_link (tests/data/fuzz-regressions has an input for each): one pass
// over the module, instruction by instruction, each limit a method that says why it refuses one
// ("" where it does not), in the order they were found.
class TranslatorLimits {
 public:
  /// Why the translator cannot take `inst`, after the instructions before it; "" where it can.
  std::string refuse(const spv_parsed_instruction_t &inst) {
    std::string why = annotatedAfterDefinition(inst);
    if (why.empty()) why = addressingModel(inst);
    if (why.empty()) {
      learn(inst);  // what it defines counts from here on
      why = specConstantOperation(inst);
    }
    if (why.empty()) why = reservedName(inst);
    if (why.empty()) why = builtinUse(inst);
    if (why.empty()) why = builtinKind(inst);
    if (why.empty()) why = parameterCount(inst);
    if (why.empty()) why = literals(inst);
    if (why.empty()) why = unimplemented(inst);
    return why;
  }

 private:
  static uint32_t word(const spv_parsed_instruction_t &inst, uint16_t operand) {
    return inst.words[inst.operands[operand].offset];
  }
  // A literal string operand, up to its NUL and never past its words.
  static std::string_view text(const spv_parsed_instruction_t &inst, uint16_t operand) {
    const char *at = reinterpret_cast<const char *>(inst.words + inst.operands[operand].offset);
    return {at, strnlen(at, inst.operands[operand].num_words * 4u)};
  }
  static bool annotates(uint32_t opcode) {
    return opcode == SpvOpName || opcode == SpvOpMemberName || opcode == SpvOpDecorate ||
           opcode == SpvOpMemberDecorate || opcode == SpvOpDecorateId || opcode == SpvOpDecorateString ||
           opcode == SpvOpMemberDecorateString;
  }

  // What later instructions are checked against: the ids defined so far, their types, what the
  // pointer types point to, composites' members and integer constants' values.
  void learn(const spv_parsed_instruction_t &inst) {
    if (inst.result_id) defined_.insert(inst.result_id);
    if (inst.result_id && inst.type_id) typeOf_[inst.result_id] = inst.type_id;
    if (inst.opcode == SpvOpTypePointer && inst.num_words >= 4) pointee_[inst.result_id] = inst.words[3];
    if (inst.opcode == SpvOpTypeInt) integers_.insert(inst.result_id);
    if (inst.opcode == SpvOpTypeStruct)
      composites_[inst.result_id] = {true, std::vector<uint32_t>(inst.words + 2, inst.words + inst.num_words)};
    const bool elements = inst.opcode == SpvOpTypeArray || inst.opcode == SpvOpTypeRuntimeArray ||
                          inst.opcode == SpvOpTypeVector || inst.opcode == SpvOpTypeMatrix;
    if (elements && inst.num_words >= 3) composites_[inst.result_id] = {false, {inst.words[2]}};
    if (inst.opcode == SpvOpConstant && inst.num_words >= 4)
      constants_[inst.result_id] = inst.words[3] | (inst.num_words >= 5 ? uint64_t(inst.words[4]) << 32 : 0);
  }

  // It asserts that what a name or decoration targets is defined after it: only an
  // OpExtInstImport or OpString comes before, and the validator lets them be named.
  std::string annotatedAfterDefinition(const spv_parsed_instruction_t &inst) const {
    if (!annotates(inst.opcode) || inst.num_words < 2 || !defined_.count(inst.words[1])) return "";
    return "a name or decoration of %" + std::to_string(inst.words[1]) + ", defined before it";
  }

  // Logical addressing (not OpenCL's) leaves its reader without a target: it ends on some such
  // modules, and its writer on the rest.
  static std::string addressingModel(const spv_parsed_instruction_t &inst) {
    if (inst.opcode != SpvOpMemoryModel || inst.num_words < 2 || inst.words[1] == SpvAddressingModelPhysical32 ||
        inst.words[1] == SpvAddressingModelPhysical64)
      return "";
    return "addressing model " + std::to_string(inst.words[1]) + ", not OpenCL's Physical32 or Physical64";
  }

  // A specialization constant's operation, which the validator does not check: the translator
  // casts what a pointer operation takes to a pointer, folds an access chain's indexes into the
  // pointed-to type unchecked (each must be an integer and index a composite, a struct's by a
  // constant in range), and crashed on an operation on numbers that takes or makes a pointer (a
  // pointer's UConvert), and on a conversion from a number of what is a pointer.
  std::string specConstantOperation(const spv_parsed_instruction_t &inst) const {
    if (inst.opcode != SpvOpSpecConstantOp || inst.num_operands < 4) return "";
    const uint32_t operation = word(inst, 2);
    const bool chain = isAccessChain(operation);
    const bool onPointer = chain || operation == SpvOpPtrCastToGeneric || operation == SpvOpGenericCastToPtr;
    auto type = typeOf_.find(word(inst, 3));
    auto pointee = type == typeOf_.end() ? pointee_.end() : pointee_.find(type->second);
    if (onPointer && pointee == pointee_.end())
      return "a specialization constant's pointer operation on %" + std::to_string(word(inst, 3)) + ", not a pointer";
    const bool ptrChain = operation == SpvOpPtrAccessChain || operation == SpvOpInBoundsPtrAccessChain;
    for (uint16_t i = 4; chain && i < inst.num_operands; ++i) {  // a pointer chain's element too
      auto indexType = typeOf_.find(word(inst, i));
      if (indexType == typeOf_.end() || !integers_.count(indexType->second))
        return "a specialization constant's access chain whose index %" + std::to_string(word(inst, i)) +
               " is not an integer";
    }
    uint32_t at = chain ? pointee->second : 0;  // the type indexed next
    for (uint16_t i = ptrChain ? 5 : 4; chain && i < inst.num_operands; ++i) {
      auto composite = composites_.find(at);
      auto index = constants_.find(word(inst, i));
      const bool isStruct = composite != composites_.end() && composite->second.first;
      if (composite == composites_.end() ||
          (isStruct && (index == constants_.end() || index->second >= composite->second.second.size())))
        return "a specialization constant's access chain whose index %" + std::to_string(word(inst, i)) +
               " does not index its type";
      at = composite->second.second[isStruct ? index->second : 0];
    }
    // Its conversions between pointers and numbers take the operand for what they convert from (a
    // pointer's ConvertUToPtr crashed it).
    const bool operandIsPointer = pointee != pointee_.end();
    if ((operation == SpvOpConvertUToPtr && operandIsPointer) || (operation == SpvOpConvertPtrToU && !operandIsPointer))
      return "a specialization constant's conversion " + std::to_string(operation) + " of %" +
             std::to_string(word(inst, 3)) + (operandIsPointer ? ", a pointer" : ", not a pointer");
    const bool takesPointers = onPointer || operation == SpvOpConvertPtrToU || operation == SpvOpConvertUToPtr ||
                               operation == SpvOpBitcast;
    bool pointers = pointee_.count(word(inst, 0)) != 0;  // the result's type
    for (uint16_t i = 3; i < inst.num_operands; ++i) {
      auto operandType = typeOf_.find(word(inst, i));
      pointers |= inst.operands[i].type == SPV_OPERAND_TYPE_ID && operandType != typeOf_.end() &&
                  pointee_.count(operandType->second);
    }
    if (!takesPointers && pointers)
      return "a specialization constant's operation " + std::to_string(operation) + " on or to a pointer";
    return "";
  }

  // Its writer takes a structure named `spirv.X` or `opencl.X` for a type of its own, and asserts
  // on one that is not. (Names of builtin variables are kept for builtinUse.)
  std::string reservedName(const spv_parsed_instruction_t &inst) {
    if (inst.opcode == SpvOpName && inst.num_operands == 2) {
      const std::string_view name = text(inst, 1);
      if (name.starts_with("spirv.") || name.starts_with("opencl.")) reservedNames_.insert(inst.words[1]);
      if (name.starts_with(kBuiltinPrefix)) builtinNames_.insert(inst.words[1]);
    }
    if (inst.opcode != SpvOpTypeStruct || !reservedNames_.count(inst.result_id)) return "";
    return "a structure named as the SPIR-V to SPIR translator names its own types (spirv.*, opencl.*)";
  }

  // Reading a kernel module, it knows OpenCL's builtins alone (the work-item functions' and the
  // subgroups'), and asserts on a variable decorated as another (a shader's PointSize) or named
  // as one (`__spirv_BuiltInPointSize`, whether by OpName or by its linkage). Of such names only
  // OpenCL's builtins' pass: one that names no builtin would pass it too, but the names are the
  // implementation's, and telling the two apart would take a list of every builtin.
  static std::string builtinKind(const spv_parsed_instruction_t &inst) {
    if (inst.opcode == SpvOpDecorate && inst.num_words >= 4 && inst.words[2] == SpvDecorationBuiltIn &&
        !isOpenClBuiltin(static_cast<SpvBuiltIn>(inst.words[3])))
      return "builtin " + std::to_string(inst.words[3]) + " (of %" + std::to_string(inst.words[1]) +
             "), which is not one of OpenCL's";
    const bool named = inst.opcode == SpvOpName && inst.num_operands == 2;
    const bool linked = inst.opcode == SpvOpDecorate && inst.num_operands >= 3 &&
                        inst.words[2] == SpvDecorationLinkageAttributes;
    if (!named && !linked) return "";
    const std::string_view name = text(inst, named ? 1 : 2);
    if (!name.starts_with(kBuiltinPrefix) || isOpenClBuiltinName(name.substr(kBuiltinPrefix.size()))) return "";
    return "a name `" + std::string(name) + "`, which is not one of OpenCL's builtins";
  }
  // How it names builtin variables, and takes a variable so named for one.
  static constexpr std::string_view kBuiltinPrefix = "__spirv_BuiltIn";
  // OpenCL's builtins: those the translator lowers to work-item and subgroup functions.
  static constexpr std::pair<SpvBuiltIn, std::string_view> kOpenClBuiltins[] = {
      {SpvBuiltInNumWorkgroups, "NumWorkgroups"},
      {SpvBuiltInWorkgroupSize, "WorkgroupSize"},
      {SpvBuiltInWorkgroupId, "WorkgroupId"},
      {SpvBuiltInLocalInvocationId, "LocalInvocationId"},
      {SpvBuiltInGlobalInvocationId, "GlobalInvocationId"},
      {SpvBuiltInLocalInvocationIndex, "LocalInvocationIndex"},
      {SpvBuiltInWorkDim, "WorkDim"},
      {SpvBuiltInGlobalSize, "GlobalSize"},
      {SpvBuiltInEnqueuedWorkgroupSize, "EnqueuedWorkgroupSize"},
      {SpvBuiltInGlobalOffset, "GlobalOffset"},
      {SpvBuiltInGlobalLinearId, "GlobalLinearId"},
      {SpvBuiltInSubgroupSize, "SubgroupSize"},
      {SpvBuiltInSubgroupMaxSize, "SubgroupMaxSize"},
      {SpvBuiltInNumSubgroups, "NumSubgroups"},
      {SpvBuiltInNumEnqueuedSubgroups, "NumEnqueuedSubgroups"},
      {SpvBuiltInSubgroupId, "SubgroupId"},
      {SpvBuiltInSubgroupLocalInvocationId, "SubgroupLocalInvocationId"},
      {SpvBuiltInSubgroupEqMask, "SubgroupEqMask"},
      {SpvBuiltInSubgroupGeMask, "SubgroupGeMask"},
      {SpvBuiltInSubgroupGtMask, "SubgroupGtMask"},
      {SpvBuiltInSubgroupLeMask, "SubgroupLeMask"},
      {SpvBuiltInSubgroupLtMask, "SubgroupLtMask"},
  };
  static bool isOpenClBuiltin(SpvBuiltIn builtin) {
    return llvm::any_of(kOpenClBuiltins, [&](const auto &known) { return known.first == builtin; });
  }
  static bool isOpenClBuiltinName(std::string_view name) {
    return llvm::any_of(kOpenClBuiltins, [&](const auto &known) { return known.second == name; });
  }

  // It ends the process on a builtin variable used but as it lowers them to calls: loaded, or
  // cast to a generic pointer that is loaded or indexed (OpPtrCastToGeneric, access chains) and
  // that loaded. A variable named as it names builtins (`__spirv_BuiltIn*`) is one to it.
  std::string builtinUse(const spv_parsed_instruction_t &inst) {
    if (inst.opcode == SpvOpDecorate && inst.num_words >= 3 && inst.words[2] == SpvDecorationBuiltIn)
      builtins_[inst.words[1]] = Builtin::Variable;
    if (inst.opcode == SpvOpVariable && builtinNames_.count(inst.result_id)) builtins_[inst.result_id] = Builtin::Variable;
    const bool declares = annotates(inst.opcode) || inst.opcode == SpvOpEntryPoint ||
                          inst.opcode == SpvOpExecutionMode || inst.opcode == SpvOpExecutionModeId ||
                          inst.opcode == SpvOpDecorationGroup || inst.opcode == SpvOpGroupDecorate ||
                          inst.opcode == SpvOpGroupMemberDecorate;
    for (uint16_t i = 0; i < inst.num_operands && !declares; ++i) {
      const spv_operand_type_t type = inst.operands[i].type;
      if (type != SPV_OPERAND_TYPE_ID && type != SPV_OPERAND_TYPE_OPTIONAL_ID) continue;
      auto used = builtins_.find(word(inst, i));
      if (used == builtins_.end()) continue;
      if (i == 2 && inst.opcode == SpvOpLoad) continue;
      if (i == 2 && used->second == Builtin::Variable && inst.opcode == SpvOpPtrCastToGeneric)
        builtins_[inst.result_id] = Builtin::Generic;
      else if (i == 2 && used->second == Builtin::Generic && isAccessChain(inst.opcode))
        builtins_[inst.result_id] = Builtin::Place;
      else
        return "builtin variable %" + std::to_string(word(inst, i)) +
               " (decorated or named so) used other than loaded, which the SPIR-V to SPIR translator does not take";
    }
    return "";
  }

  // It reads past a function's parameters where they are fewer than its type's.
  std::string parameterCount(const spv_parsed_instruction_t &inst) {
    if (inst.opcode == SpvOpTypeFunction && inst.num_words >= 3) functionTypes_[inst.result_id] = inst.num_words - 3u;
    if (inst.opcode == SpvOpFunctionParameter) {
      ++parameters_;
    } else if (parametersExpected_) {
      if (parameters_ != *parametersExpected_)
        return "a function with " + std::to_string(parameters_) + " parameters whose type has " +
               std::to_string(*parametersExpected_);
      parametersExpected_.reset();
    }
    if (inst.opcode == SpvOpFunction && inst.num_words >= 5) {
      auto type = functionTypes_.find(inst.words[4]);
      parametersExpected_ = type == functionTypes_.end() ? 0 : type->second;
      parameters_ = 0;
    }
    return "";
  }

  // It exits on an extension it does not know and on a string padded with other than zeros, and
  // LLVM asserts that an alignment is a power of 2: one of a memory access (the literal after an
  // Aligned mask) or of an Alignment decoration.
  static std::string literals(const spv_parsed_instruction_t &inst) {
    static constexpr std::string_view kKnownExtensions[] = {
#define EXT(X) #X,
#include <LLVMSPIRVLib/LLVMSPIRVExtensions.inc>
#undef EXT
    };
    for (uint16_t i = 0; i < inst.num_operands; ++i) {
      const spv_parsed_operand_t &operand = inst.operands[i];
      if (operand.type == SPV_OPERAND_TYPE_LITERAL_STRING) {
        const std::string_view string = text(inst, i);
        const char *end = reinterpret_cast<const char *>(inst.words + operand.offset + operand.num_words);
        if (std::any_of(string.data() + string.size(), end, [](char c) { return c != 0; }))
          return "a string padded with other than zeros";
        if (inst.opcode == SpvOpExtension && !llvm::is_contained(kKnownExtensions, string))
          return "SPIR-V extension `" + std::string(string) + "`, which the SPIR-V to SPIR translator does not know";
      }
      const bool alignedAccess = (operand.type == SPV_OPERAND_TYPE_MEMORY_ACCESS ||
                                  operand.type == SPV_OPERAND_TYPE_OPTIONAL_MEMORY_ACCESS) &&
                                 (word(inst, i) & SpvMemoryAccessAlignedMask) && i + 1 < inst.num_operands;
      const bool alignmentDecoration = operand.type == SPV_OPERAND_TYPE_DECORATION &&
                                       word(inst, i) == SpvDecorationAlignment && i + 1 < inst.num_operands;
      if ((alignedAccess || alignmentDecoration) && !llvm::isPowerOf2_32(word(inst, i + 1)))
        return "alignment " + std::to_string(word(inst, i + 1)) + ", not a power of 2";
    }
    return "";
  }

  // It asserts on an instruction it has no class for: SPIR-V 1.4's decorations with string
  // operands (OpDecorateString with any decoration).
  static std::string unimplemented(const spv_parsed_instruction_t &inst) {
    if (inst.opcode != SpvOpDecorateString && inst.opcode != SpvOpMemberDecorateString) return "";
    return "an OpDecorateString or OpMemberDecorateString, which the SPIR-V to SPIR translator does not read";
  }

  std::set<uint32_t> defined_;               // result ids so far
  std::map<uint32_t, uint32_t> typeOf_;      // result id -> its type
  std::map<uint32_t, uint32_t> pointee_;     // OpTypePointer -> the type it points to
  std::set<uint32_t> integers_;              // OpTypeInt ids, the types an index may have
  // Composite types -> their members' types (a struct) or their element's (any other).
  std::map<uint32_t, std::pair<bool, std::vector<uint32_t>>> composites_;  // (is a struct, types)
  std::map<uint32_t, uint64_t> constants_;   // integer constants' values, which index structs
  std::set<uint32_t> reservedNames_;         // named as the translator names its own types
  std::set<uint32_t> builtinNames_;          // named as it names builtin variables
  // Builtin variables, and what is made of them: a generic pointer to one, a place in either.
  enum class Builtin { Variable, Generic, Place };
  std::map<uint32_t, Builtin> builtins_;
  std::map<uint32_t, size_t> functionTypes_;  // OpTypeFunction -> its parameter count
  std::optional<size_t> parametersExpected_;  // in a function's header: what its type says
  size_t parameters_ = 0;                     // and what it has so far
};

}  // namespace
#endif

llvm::Error checkTranslatable(std::span<const uint32_t> words) {
#if !DEVDL_HAVE_SPIRV_TRANSLATOR
  return llvm::Error::success();  // nothing is translated
#else
  // It exits on a version it does not know.
  const uint32_t newest = static_cast<uint32_t>(SPIRV::VersionNumber::MaximumVersion);
  if (words.size() > kVersionWord && words[kVersionWord] > newest)
    return fail(ErrorCode::Unsupported, "SPIR-V version " + versionText(words[kVersionWord]) +
                                            ", newer than the SPIR-V to SPIR translator reads (" + versionText(newest) + ")");
  struct Scan {
    TranslatorLimits limits;
    std::string refused;
  } scan;
  auto check = [](void *user, const spv_parsed_instruction_t *inst) -> spv_result_t {
    auto &scan = *static_cast<Scan *>(user);
    const std::string why = scan.limits.refuse(*inst);
    if (why.empty()) return SPV_SUCCESS;
    scan.refused = why + " (opcode " + std::to_string(inst->opcode) + ")";
    return SPV_REQUESTED_TERMINATION;
  };
  spirv::Context context;
  if (spirv::Diagnostic diagnostic; spvBinaryParse(context.get(), &scan, words.data(), words.size(), nullptr, check,
                                                   diagnostic.out()) != SPV_SUCCESS && scan.refused.empty())
    return fail(ErrorCode::BadFormat, "invalid SPIR-V: " + diagnostic.text());
  if (!scan.refused.empty()) return fail(ErrorCode::Unsupported, scan.refused);
  return llvm::Error::success();
#endif
}

bool canTranslateToSpir() { return DEVDL_HAVE_SPIRV_TRANSLATOR; }

#if DEVDL_HAVE_SPIRV_TRANSLATOR
namespace {

// The translator is not thread-safe (lazily built tables, LLVM's global options): one
// translation at a time, either way, as intel/opencl-clang guards it. The devices' builds still
// overlap.
std::mutex translator;

// `words` as LLVM IR, specialized, with the builtins as `builtins` says; refused first where
// checkTranslatable refuses it, and where the translator makes invalid IR (LLVM's passes assume
// valid IR). The caller holds `translator`.
llvm::Expected<std::unique_ptr<llvm::Module>> readModule(llvm::LLVMContext &context, std::span<const uint32_t> words,
                                                         std::span<const SpecConstant> specConstants,
                                                         SPIRV::BIsRepresentation builtins) {
  // A parameter's hint that its memory is neither read nor written (FuncParamAttr NoReadWrite):
  // the translator's table has no LLVM attribute for it, and its reader asserts. Dropped, as a
  // hint may be.
  const std::vector<uint32_t> translated = withoutInstructions(words, [&](size_t at, size_t count) {
    return (words[at] & 0xffff) == SpvOpDecorate && count == 4 && words[at + 2] == SpvDecorationFuncParamAttr &&
           words[at + 3] == SpvFunctionParameterAttributeNoReadWrite;
  });
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

// Moves the module's variables in the global address space into one region of host memory that
// `place` gives: each use addresses the region instead, so kernels built apart share them. A
// variable whose initializer holds an address the region cannot (a function's, or a variable's
// that stays) stays.
llvm::Error placeVariables(llvm::Module &module, PlaceVariables place) {
  constexpr uint64_t kPage = 4096;  // the region's alignment
  const llvm::DataLayout &layout = module.getDataLayout();
  if (layout.getPointerSizeInBits(1) != 64) return llvm::Error::success();  // addresses of 32 bits: SPIR, not SPIR64
  // What llvm.used names must stay a global to be named there.
  llvm::SmallVector<llvm::GlobalValue *> used;
  llvm::collectUsedGlobalVariables(module, used, /*CompilerUsed=*/false);
  llvm::collectUsedGlobalVariables(module, used, /*CompilerUsed=*/true);
  std::map<const llvm::GlobalValue *, uint64_t> offsets;  // of those placed, once laid out
  uint64_t total = 0;
  for (llvm::GlobalVariable &variable : module.globals()) {
    const uint64_t size = variable.isDeclaration() ? 0 : layout.getTypeAllocSize(variable.getValueType());
    if (!size || variable.getAddressSpace() != 1 || variable.getAlign().valueOrOne() > kPage ||
        llvm::is_contained(used, &variable))
      continue;
    total += std::min(size, kMaxRegion + 1);
    if (total > kMaxRegion) return llvm::Error::success();  // more than a region takes: none moves
    offsets[&variable] = 0;
  }
  // Until none is dropped: a variable whose initializer holds an address outside the region.
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
  if (offsets.empty()) return llvm::Error::success();
  VariableLayout region;
  std::vector<llvm::GlobalVariable *> moved;
  uint64_t initialized = 0;  // where the last variable that does not start as zero ends
  for (llvm::GlobalVariable &variable : module.globals()) {  // in the module's order
    if (!offsets.count(&variable)) continue;
    const llvm::Align align = std::max(variable.getAlign().valueOrOne(), layout.getPrefTypeAlign(variable.getValueType()));
    const uint64_t offset = llvm::alignTo(region.size, std::min(align.value(), kPage));
    const uint64_t size = layout.getTypeAllocSize(variable.getValueType());
    if (offset + size > kMaxRegion) return llvm::Error::success();  // more than a region takes: none moves
    offsets[&variable] = offset;
    region.size = offset + size;
    if (!variable.getInitializer()->isNullValue()) initialized = region.size;
    // By the name an image exports it under (linkSpirv drops the others' names).
    if (variable.hasName()) region.variables.push_back({variable.getName().str(), offset, size});
    moved.push_back(&variable);
  }
  region.initial.assign(initialized, '\0');
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
  auto address = place(region);
  if (!address) return address.takeError();
  llvm::Type *i64 = llvm::Type::getInt64Ty(module.getContext());
  for (llvm::GlobalVariable *variable : moved) {
    variable->replaceAllUsesWith(
        llvm::ConstantExpr::getIntToPtr(llvm::ConstantInt::get(i64, *address + offsets[variable]), variable->getType()));
    variable->eraseFromParent();
  }
  return llvm::Error::success();
}

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

// The extensions a module declares, as the translator names them.
SPIRV::TranslatorOpts::ExtensionsStatusMap declaredExtensions(std::span<const uint32_t> words) {
  static const std::map<std::string_view, SPIRV::ExtensionID> kIds = {
#define EXT(X) {#X, SPIRV::ExtensionID::X},
#include <LLVMSPIRVLib/LLVMSPIRVExtensions.inc>
#undef EXT
  };
  SPIRV::TranslatorOpts::ExtensionsStatusMap declared;
  walkInstructions(words, [&](size_t at, size_t count) {
    if ((words[at] & 0xffff) != SpvOpExtension || count < 2) return true;
    const char *text = reinterpret_cast<const char *>(&words[at + 1]);
    if (auto it = kIds.find(std::string_view(text, strnlen(text, (count - 1) * 4))); it != kIds.end())
      declared[it->second] = true;
    return true;
  });
  return declared;
}

// `module` written as SPIR-V within what `like` has: its version and the extensions it declares.
// `what` names the module in errors. The caller holds `translator`.
llvm::Expected<std::string> writeSpirvLike(llvm::Module &module, std::span<const uint32_t> like, const char *what) {
  const auto version = static_cast<SPIRV::VersionNumber>(
      std::clamp(like[kVersionWord], static_cast<uint32_t>(SPIRV::VersionNumber::MinimumVersion),
                 static_cast<uint32_t>(SPIRV::VersionNumber::MaximumVersion)));
  SPIRV::TranslatorOpts options(version, declaredExtensions(like));
  std::ostringstream out;
  std::string error;
  if (!llvm::writeSpirv(&module, options, out, error))
    return fail(ErrorCode::Unsupported, llvm::Twine(what) + " cannot be written as SPIR-V: " + error);
  return std::move(out).str();
}

// The words of SPIR-V the translator wrote, which must validate.
llvm::Expected<std::vector<uint32_t>> validSpirv(const std::string &written, const char *what) {
  std::vector<uint32_t> words(written.size() / 4);
  std::memcpy(words.data(), written.data(), words.size() * 4);
  spirv::Context validator;
  spv_const_binary_t binary{words.data(), words.size()};
  if (spirv::Diagnostic diagnostic; spvValidate(validator.get(), &binary, diagnostic.out()) != SPV_SUCCESS)
    return fail(ErrorCode::Unsupported, llvm::Twine(what) + " written as SPIR-V is invalid: " + diagnostic.text());
  return words;
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
  std::string written;
  {
    std::lock_guard lock(translator);
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
#endif
}

llvm::Expected<std::string> spirvToSpir(std::span<const uint32_t> words, std::span<const SpecConstant> specConstants,
                                        bool optimize, PlaceVariables place) {
#if !DEVDL_HAVE_SPIRV_TRANSLATOR
  return fail(ErrorCode::Unsupported, "this build of devdl has no SPIRV-LLVM-Translator (DEVDL_PORTABLE): the "
                                      "device must take SPIR-V itself");
#else
  std::lock_guard lock(translator);
  llvm::LLVMContext context;
  auto module = readModule(context, words, specConstants, SPIRV::BIsRepresentation::OpenCL12);
  if (!module) return module.takeError();
  if (place)
    if (llvm::Error err = placeVariables(**module, place)) return err;
  if (optimize) optimizeAcrossImages(**module);
  std::string bitcode;
  llvm::raw_string_ostream os(bitcode);
  llvm::WriteBitcodeToFile(**module, os);
  os.flush();
  return bitcode;
#endif
}

llvm::Expected<std::vector<uint32_t>> optimizeSpirv(std::span<const uint32_t> words,
                                                    std::span<const SpecConstant> specConstants) {
#if !DEVDL_HAVE_SPIRV_TRANSLATOR
  return fail(ErrorCode::Unsupported, "this build of devdl has no SPIRV-LLVM-Translator (DEVDL_PORTABLE)");
#else
  std::string written;
  {
    std::lock_guard lock(translator);
    llvm::LLVMContext context;
    auto module = readModule(context, words, specConstants, SPIRV::BIsRepresentation::SPIRVFriendlyIR);
    if (!module) return module.takeError();
    optimizeAcrossImages(**module);
    auto spirv = writeSpirvLike(**module, words, "the optimized module");
    if (!spirv) return spirv.takeError();
    written = std::move(*spirv);
  }
  return validSpirv(written, "the optimized module");
#endif
}

}  // namespace devdl::backend
