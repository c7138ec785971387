// The link of a plan's SPIR-V images into one module (spirv/link.h): SPIRV-Tools' linker, with
// what devdl does before it (versions raised, SpecIds renumbered, local variables unnamed) and
// after it (builtin variables merged, the module validated).
#include "backend/spirv/link.h"
#include "backend/spirv/words.h"
#include "support/error.h"
#include "support/spirv_tools.h"

#include <spirv-tools/libspirv.h>
#include <spirv-tools/linker.hpp>
#include <spirv/unified1/spirv.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

namespace devdl::backend {

namespace {

constexpr uint32_t kMaxSpecId = 0xffff;

// What a first parse of a linked module finds: its variables, and what is decorated as a builtin.
struct BuiltinScan {
  std::set<uint32_t> variables;
  std::vector<std::pair<uint32_t, uint32_t>> builtins;  // (variable or other id, builtin)
};

spv_result_t scanForBuiltins(void *user, const spv_parsed_instruction_t *inst) {
  auto &scan = *static_cast<BuiltinScan *>(user);
  if (inst->opcode == SpvOpVariable) scan.variables.insert(inst->result_id);
  if (inst->opcode == SpvOpDecorate && inst->num_words >= 4 && inst->words[2] == SpvDecorationBuiltIn)
    scan.builtins.emplace_back(inst->words[1], inst->words[3]);
  return SPV_SUCCESS;
}

// Each variable for a builtin after the first, to the first: duplicate variable -> the one kept.
std::map<uint32_t, uint32_t> duplicateBuiltinVariables(const BuiltinScan &scan) {
  std::map<uint32_t, uint32_t> replace;
  std::map<uint32_t, uint32_t> kept;  // builtin -> variable
  for (const auto &[id, builtin] : scan.builtins)
    if (scan.variables.count(id)) {
      auto [it, first] = kept.try_emplace(builtin, id);
      if (!first) replace[id] = it->second;
    }
  return replace;
}

struct BuiltinRewrite {
  std::map<uint32_t, uint32_t> replace;  // duplicate variable -> the one kept
  std::vector<uint32_t> out;
};

// Copies an instruction to the rewrite's output, but for a duplicate and its names and
// decorations, with each use of a duplicate pointed at the variable kept.
spv_result_t rewriteBuiltinUses(void *user, const spv_parsed_instruction_t *inst) {
  auto &rewrite = *static_cast<BuiltinRewrite *>(user);
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
}

}  // namespace

// The linker leaves each module's variable for a builtin (get_global_id reads
// GlobalInvocationId) in the linked module, as it never pairs builtins by their linkage: two
// variables for one builtin, which the translator refuses and PoCL crashes on. This keeps the
// first variable of each builtin, points every use of the others at it, and drops them with
// their names and decorations (operands found by spvBinaryParse, so no literal is touched).
llvm::Expected<std::vector<uint32_t>> mergeBuiltinVariables(std::vector<uint32_t> words) {
  spirv::Context context;
  auto failed = [](const char *what, const spirv::Diagnostic &diagnostic) {
    return fail(ErrorCode::Unsupported, llvm::Twine("linked SPIR-V: ") + what + ": " + diagnostic.text());
  };
  BuiltinScan scan;
  if (spirv::Diagnostic diagnostic; spvBinaryParse(context.get(), &scan, words.data(), words.size(), nullptr,
                                                   scanForBuiltins, diagnostic.out()) != SPV_SUCCESS)
    return failed("cannot parse", diagnostic);
  BuiltinRewrite rewrite{duplicateBuiltinVariables(scan), {}};
  if (rewrite.replace.empty()) return words;
  rewrite.out.assign(words.begin(), words.begin() + kHeaderWords);
  if (spirv::Diagnostic diagnostic; spvBinaryParse(context.get(), &rewrite, words.data(), words.size(), nullptr,
                                                   rewriteBuiltinUses, diagnostic.out()) != SPV_SUCCESS)
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

namespace {

// The images' words, each checked to be SPIR-V.
llvm::Expected<std::vector<std::vector<uint32_t>>> modulesOfImages(std::span<const DeviceImage *const> images,
                                                                   std::span<const std::string> labels) {
  std::vector<std::vector<uint32_t>> modules;
  for (size_t i = 0; i < images.size(); ++i) {
    const Bytes bytes = images[i]->bytes;
    if (images[i]->format != ImageFormat::SpirV || bytes.size() % 4 || bytes.size() < 20)
      return inImage(fail(ErrorCode::Unsupported, "not a SPIR-V module: cannot link it as SPIR-V"), labels[i]);
    std::vector<uint32_t> words(bytes.size() / 4);
    std::memcpy(words.data(), bytes.data(), bytes.size());
    modules.push_back(std::move(words));
  }
  return modules;
}

// Each module's version raised to the highest of them.
void raiseToHighestVersion(std::vector<std::vector<uint32_t>> &modules) {
  uint32_t version = 0;
  for (const auto &words : modules) version = std::max(version, words[kVersionWord]);
  for (auto &words : modules) words[kVersionWord] = version;
}

// Each module's specialization constants get SpecIds of their own (see linkedSpecId): two
// images may both use SpecId 0, and one value must not set both.
llvm::Error renumberSpecIds(std::vector<std::vector<uint32_t>> &modules, std::span<const std::string> labels) {
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
  return llvm::Error::success();
}

llvm::Expected<std::vector<uint32_t>> linkModules(const std::vector<std::vector<uint32_t>> &modules,
                                                  std::span<const std::string> labels, bool keepExports) {
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
  return linked;
}

// Valid inputs can still link into an invalid module (an import's type that differs from its
// definition's, which the linker does not compare everywhere): nothing downstream is given it.
// A module without kernels (a library linked for its variables) is valid only as a library: it
// is validated as one, with the Linkage capability the linker took away.
llvm::Error validateLinked(const std::vector<uint32_t> &merged, std::span<const std::string> labels,
                           bool keepExports) {
  bool kernels = false;
  walkInstructions(merged, [&](size_t at, size_t) {
    kernels = (merged[at] & 0xffff) == SpvOpEntryPoint;
    return !kernels;
  });
  std::vector<uint32_t> asLibrary;
  if (!kernels && !keepExports) {
    asLibrary = merged;
    asLibrary.insert(asLibrary.begin() + kHeaderWords, {2u << 16 | SpvOpCapability, SpvCapabilityLinkage});
  }
  const std::vector<uint32_t> &checked = asLibrary.empty() ? merged : asLibrary;
  spirv::Context validator;
  spv_const_binary_t binary{checked.data(), checked.size()};
  if (spirv::Diagnostic diagnostic; spvValidate(validator.get(), &binary, diagnostic.out()) != SPV_SUCCESS) {
    std::string others;
    for (size_t i = 1; i < labels.size(); ++i) others += (i > 1 ? ", " : " (with ") + labels[i];
    return inImage(fail(ErrorCode::BadFormat, "the module it links into" + others + (others.empty() ? "" : ")") +
                                                  " is invalid SPIR-V: " + diagnostic.text()),
                   labels.front());
  }
  return llvm::Error::success();
}

}  // namespace

llvm::Expected<std::vector<uint32_t>> linkSpirv(std::span<const DeviceImage *const> images,
                                                std::span<const std::string> labels, bool keepExports) {
  auto modules = modulesOfImages(images, labels);
  if (!modules) return modules.takeError();
  raiseToHighestVersion(*modules);
  for (auto &words : *modules) unnameLocalVariables(words);
  if (llvm::Error err = renumberSpecIds(*modules, labels)) return err;
  auto linked = linkModules(*modules, labels, keepExports);
  if (!linked) return linked.takeError();
  auto merged = mergeBuiltinVariables(std::move(*linked));
  if (!merged) return merged.takeError();
  if (llvm::Error err = validateLinked(*merged, labels, keepExports)) return err;
  return merged;
}

uint32_t linkedSpecId(size_t module, uint32_t specId) { return static_cast<uint32_t>(module) << 16 | specId; }

}  // namespace devdl::backend
