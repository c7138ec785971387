#include "backend/spirv/program_part.h"

#include "backend/spirv/words.h"
#include "support/error.h"

#include <llvm/ADT/StringSet.h>
#include <spirv-tools/optimizer.hpp>
#include <spirv/unified1/spirv.h>

#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace devdl::backend {

namespace {

// The names other parts answer for: their kernels, and those whose exports go (a kernel's body,
// exported under its name by llvm-spirv, where no image calls it; a variable; a function of a part
// cut to what it uses, which no image of this part calls).
struct OthersNames {
  llvm::StringSet<> kernels, local, variables;
};

OthersNames othersNames(std::span<const ProgramPart> parts, size_t part, const llvm::StringSet<> &imported) {
  OthersNames others;
  for (size_t p = 0; p < parts.size(); ++p)
    if (p != part) {
      for (const std::string &name : parts[p].kernels) {
        others.kernels.insert(name);
        if (!imported.contains(name)) others.local.insert(name);
      }
      for (const std::string &name : parts[p].variables) others.local.insert(name), others.variables.insert(name);
      for (const std::string &name : parts[p].functions)
        if (!imported.contains(name)) others.local.insert(name);
    }
  return others;
}

// Other parts' entry points, then what names them: their execution modes and exports. Other
// parts' variables made local, by id, go to `othersVariables`.
std::vector<uint32_t> withoutOthersNames(std::span<const uint32_t> words, const OthersNames &others,
                                         std::unordered_map<uint32_t, std::string_view> &othersVariables) {
  std::unordered_set<uint32_t> entries;
  walkInstructions(words, [&](size_t at, size_t count) {
    const uint32_t opcode = words[at] & 0xffff;
    if (opcode == SpvOpEntryPoint && count >= 4 && others.kernels.contains(literalAt(words, at + 3, at + count)))
      entries.insert(words[at + 2]);
    return opcode != SpvOpFunction;  // entry points come before any function
  });
  return withoutInstructions(words, [&](size_t at, size_t count) {
    const uint32_t opcode = words[at] & 0xffff;
    if (opcode == SpvOpEntryPoint || opcode == SpvOpExecutionMode || opcode == SpvOpExecutionModeId)
      return count >= 3 && entries.count(words[at + (opcode == SpvOpEntryPoint ? 2 : 1)]) > 0;
    if (opcode == SpvOpDecorate && count >= 4 && words[at + 2] == SpvDecorationLinkageAttributes) {
      const uint32_t type = words[at + count - 1];
      const std::string_view name = literalAt(words, at + 3, at + count - 1);
      if ((type != SpvLinkageTypeExport && type != SpvLinkageTypeLinkOnceODR) || !others.local.contains(name))
        return false;
      if (others.variables.contains(name)) othersVariables.emplace(words[at + 1], name);
      return true;
    }
    return false;
  });
}

// What nothing left reaches: functions (other parts' kernels and what they alone call, imports
// no one calls now), then variables (other parts', imports no one uses now), then constants.
llvm::Expected<std::vector<uint32_t>> withoutUnreached(const std::vector<uint32_t> &cut, size_t part) {
  spvtools::Optimizer optimizer(SPV_ENV_UNIVERSAL_1_6);
  std::string diagnostics;
  optimizer.SetMessageConsumer([&](spv_message_level_t level, const char *, const spv_position_t &, const char *message) {
    if (level <= SPV_MSG_ERROR) diagnostics += (diagnostics.empty() ? "" : "; ") + std::string(message);
  });
  optimizer.RegisterPass(spvtools::CreateEliminateDeadFunctionsPass())
      .RegisterPass(spvtools::CreateDeadVariableEliminationPass())
      .RegisterPass(spvtools::CreateEliminateDeadConstantPass());
  spvtools::OptimizerOptions options;
  options.set_run_validator(false);  // the image was validated when it was read
  std::vector<uint32_t> out;
  if (!optimizer.Run(cut.data(), cut.size(), &out, options))
    return fail(ErrorCode::BadFormat, "SPIRV-Tools could not cut the module to part " + llvm::Twine(part) + ": " +
                                          (diagnostics.empty() ? "no reason given" : diagnostics));
  return out;
}

// Another part's variable that this part's code still uses would be a second instance of it:
// the graph missed a use, and the program must not be split so.
llvm::Error checkNoSecondInstance(std::span<const uint32_t> out,
                                  const std::unordered_map<uint32_t, std::string_view> &othersVariables, size_t part) {
  std::string_view second;
  walkInstructions(out, [&](size_t at, size_t count) {
    if ((out[at] & 0xffff) == SpvOpVariable && count >= 4)
      if (auto it = othersVariables.find(out[at + 2]); it != othersVariables.end()) second = it->second;
    return second.empty();
  });
  if (!second.empty())
    return fail(ErrorCode::Unsupported, "part " + llvm::Twine(part) + "'s code uses variable `" + second +
                                            "`, which another part holds: it would have two instances");
  return llvm::Error::success();
}

}  // namespace

llvm::Expected<std::vector<uint32_t>> spirvForPart(std::span<const uint32_t> words, std::span<const ProgramPart> parts,
                                                   size_t part, const llvm::StringSet<> &imported) {
  if (words.size() < kHeaderWords || words[0] != SpvMagicNumber)
    return fail(ErrorCode::BadFormat, "invalid SPIR-V: no module header in this byte order");
  std::unordered_map<uint32_t, std::string_view> othersVariables;  // made local here, by id
  const std::vector<uint32_t> cut = withoutOthersNames(words, othersNames(parts, part, imported), othersVariables);
  auto out = withoutUnreached(cut, part);
  if (!out) return out.takeError();
  if (llvm::Error err = checkNoSecondInstance(*out, othersVariables, part)) return err;
  return out;
}

}  // namespace devdl::backend
