// What the SPIR-V to SPIR translator (15) ends the process on in modules the validator accepts
// (spirv/translator_limits.h): TranslatorLimits, one limit a method, and checkTranslatable, which
// runs them over a module before anything calls the translator.
#include "backend/spirv/translator_limits.h"
#include "backend/spirv/words.h"

#include <spirv/unified1/spirv.h>

#if DEVDL_HAVE_SPIRV_TRANSLATOR
#include "support/error.h"
#include "support/spirv_tools.h"

#include <LLVMSPIRVLib/LLVMSPIRVLib.h>
#include <llvm/ADT/STLExtras.h>
#include <llvm/Support/MathExtras.h>
#include <spirv-tools/libspirv.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
#endif

namespace devdl::backend {

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

std::vector<uint32_t> withoutUnreadableHints(std::span<const uint32_t> words) {
  return withoutInstructions(words, [&](size_t at, size_t count) {
    return (words[at] & 0xffff) == SpvOpDecorate && count == 4 && words[at + 2] == SpvDecorationFuncParamAttr &&
           words[at + 3] == SpvFunctionParameterAttributeNoReadWrite;
  });
}

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

}  // namespace devdl::backend
