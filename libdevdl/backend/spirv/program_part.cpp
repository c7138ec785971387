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

llvm::Expected<std::vector<uint32_t>> spirvForPart(std::span<const uint32_t> words, std::span<const ProgramPart> parts,
                                                   size_t part, const llvm::StringSet<> &imported) {
  if (words.size() < kHeaderWords || words[0] != SpvMagicNumber)
    return fail(ErrorCode::BadFormat, "invalid SPIR-V: no module header in this byte order");
  // The names other parts answer for: their kernels, and those whose exports go (a kernel's body,
  // exported under its name by llvm-spirv, where no image calls it; a variable).
  llvm::StringSet<> kernels, local, variables;
  for (size_t p = 0; p < parts.size(); ++p)
    if (p != part) {
      for (const std::string &name : parts[p].kernels) {
        kernels.insert(name);
        if (!imported.contains(name)) local.insert(name);
      }
      for (const std::string &name : parts[p].variables) local.insert(name), variables.insert(name);
    }
  // Other parts' entry points, then what names them: their execution modes and exports.
  std::unordered_set<uint32_t> entries;
  walkInstructions(words, [&](size_t at, size_t count) {
    const uint32_t opcode = words[at] & 0xffff;
    if (opcode == SpvOpEntryPoint && count >= 4 && kernels.contains(literalAt(words, at + 3, at + count)))
      entries.insert(words[at + 2]);
    return opcode != SpvOpFunction;  // entry points come before any function
  });
  std::unordered_map<uint32_t, std::string_view> othersVariables;  // made local here, by id
  std::vector<uint32_t> cut = withoutInstructions(words, [&](size_t at, size_t count) {
    const uint32_t opcode = words[at] & 0xffff;
    if (opcode == SpvOpEntryPoint || opcode == SpvOpExecutionMode || opcode == SpvOpExecutionModeId)
      return count >= 3 && entries.count(words[at + (opcode == SpvOpEntryPoint ? 2 : 1)]) > 0;
    if (opcode == SpvOpDecorate && count >= 4 && words[at + 2] == SpvDecorationLinkageAttributes) {
      const uint32_t type = words[at + count - 1];
      const std::string_view name = literalAt(words, at + 3, at + count - 1);
      if ((type != SpvLinkageTypeExport && type != SpvLinkageTypeLinkOnceODR) || !local.contains(name)) return false;
      if (variables.contains(name)) othersVariables.emplace(words[at + 1], name);
      return true;
    }
    return false;
  });
  // What nothing left reaches: functions (other parts' kernels and what they alone call, imports
  // no one calls now), then variables (other parts', imports no one uses now), then constants.
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
  // Another part's variable that this part's code still uses would be a second instance of it:
  // the graph missed a use, and the program must not be split so.
  std::string_view second;
  walkInstructions(out, [&](size_t at, size_t count) {
    if ((out[at] & 0xffff) == SpvOpVariable && count >= 4)
      if (auto it = othersVariables.find(out[at + 2]); it != othersVariables.end()) second = it->second;
    return second.empty();
  });
  if (!second.empty())
    return fail(ErrorCode::Unsupported, "part " + llvm::Twine(part) + "'s code uses variable `" + second +
                                            "`, which another part holds: it would have two instances");
  return out;
}

}  // namespace devdl::backend
