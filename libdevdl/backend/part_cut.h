// A plan's inputs cut to what some of its names use, for a link of that alone: a kernel linked when
// it is first used rather than with every kernel of its library (issue 67). The part is
// partReaching's (backend/partition.h); each SPIR-V image is cut to it by spirvForPart
// (backend/spirv/program_part.h) and read again, so that the link sees what is left as an image of
// its own: validated, its symbols those it still has.
#pragma once

#include "backend/backend.h"
#include "backend/partition.h"

#include <llvm/Support/Error.h>

#include <deque>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace devdl::backend {

/// Inputs cut to a part, and what they hold. Not copyable: the inputs point into it.
class CutInputs {
 public:
  CutInputs() = default;
  CutInputs(const CutInputs &) = delete;
  CutInputs &operator=(const CutInputs &) = delete;
  CutInputs(CutInputs &&) = default;

  /// The given inputs in order, each image cut, the names each names (interposed, reached
  /// elsewhere) those the cut image still has.
  std::vector<LinkInput> inputs;
  /// The part and the rest (partReaching): the kernels the cut program answers for, and the
  /// variables and functions it has.
  std::vector<ProgramPart> parts;
  /// For DEVDL_DEBUG=statistics, a line an input: what it was given ("LABEL: 1 of 1001 kernels,
  /// 1 of 1 functions, 0 of 0 variables; 2,380 of 412,264 bytes").
  std::vector<std::string> given;

 private:
  friend llvm::Expected<std::optional<CutInputs>> cutToRoots(std::span<const LinkInput> given,
                                                             std::span<const std::string_view> roots,
                                                             bool joinVariables);
  std::deque<std::vector<uint32_t>> words_;
  std::deque<DeviceImage> images_;
  std::deque<std::vector<std::string_view>> names_;
};

/// `given` cut to what `roots` use (partReaching: the roots' kernels, a variable standing for the
/// first kernel that reaches it; with `joinVariables`, the kernels that reach a variable theirs
/// reach, for a device on which another program cannot reach its instance). nullopt where they are
/// not cut: an input that is not SPIR-V devdl's validator vouched for, that keeps statics or has
/// specialization constants set, or roots no kernel stands for. Fails where a module cannot be
/// cut or its cut is not valid SPIR-V, naming the input.
llvm::Expected<std::optional<CutInputs>> cutToRoots(std::span<const LinkInput> given,
                                                    std::span<const std::string_view> roots, bool joinVariables);

}  // namespace devdl::backend
