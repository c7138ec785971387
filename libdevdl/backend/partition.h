// A program's kernels in parts that can be linked and optimized apart, on several threads, with
// nothing a program can observe telling the difference from one module. Two kernels must share a
// part where their code reaches a common variable (one instance, which both see), or a function
// whose address is taken (one address, which both may compare or call) or another kernel: what
// they reach through calls alone (pure code) each part compiles its own copy of.
#pragma once

#include "image/code_graph.h"

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace devdl {

struct ProgramPart {
  std::vector<std::string> kernels;  // the kernels this part's module holds and answers for
  // The variables it holds: those its kernels reach, and in the first part every variable no
  // kernel reaches.
  std::vector<std::string> variables;
  uint64_t size = 0;  // the code its kernels reach, in bytes: the work of its link
  // The functions its kernels reach, where a part is cut to what it uses (partReaching): a cut
  // keeps these of each image's exported functions. Empty in partitionKernels' parts.
  std::vector<std::string> functions;
};

/// The kernels the `graphs` of a plan's images define (names bind across images) in at most
/// `parts` parts, balanced by size, in the order their first kernels are defined. `together`:
/// pairs of kernel names a linker needs in one part whatever their code. One part holding every
/// kernel and variable where `parts` is 1 or nothing can be separated; then, with `why`, why the
/// kernels could not be ("one kernel", or what they reach in common).
std::vector<ProgramPart> partitionKernels(std::span<const CodeGraph> graphs, size_t parts,
                                          std::span<const std::pair<std::string_view, std::string_view>> together = {},
                                          std::string *why = nullptr);

/// What `roots` use of a program, for a link of that alone (a kernel linked when it is first
/// used): [0] the roots' kernels (a variable stands for the first kernel that reaches it), with
/// every kernel that must share their module (it reaches a function whose address their code
/// takes, or with `joinVariables`, where the variables' instances cannot be reached from another
/// program, a variable their code reaches), and every variable and function those kernels reach;
/// [1] the rest: the other kernels, and the variables and functions no kernel of [0] reaches.
/// Empty where no root is a kernel, or a variable a kernel reaches.
std::vector<ProgramPart> partReaching(std::span<const CodeGraph> graphs, std::span<const std::string_view> roots,
                                      bool joinVariables);

}  // namespace devdl
