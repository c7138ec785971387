// A program linked in parts on a device whose driver compiles every kernel when it links (Intel's
// OpenCL runtimes): each part's images cut to its kernels (spirvForPart), compiled and linked by
// the driver in a helper process of its own (devdl-translate), whose binary this process loads,
// so that a library of many kernels compiles on every core. In one process the parts would gain
// nothing: Intel's CPU runtime builds one program at a time in a process, whatever the context.
#include "backend/opencl/linker.h"
#include "backend/opencl/program_builder.h"
#include "backend/spirv/program_part.h"
#include "backend/spirv/translation.h"
#include "backend/spirv/translator_process.h"
#include "backend/spirv/translator_protocol.h"

#include "image/code_graph.h"
#include "support/error.h"

#include <cstring>
#include <optional>
#include <thread>

namespace devdl::backend::opencl {

std::vector<ProgramPart> Linker::planParts(std::span<const LinkInput> inputs, unsigned jobs, std::string *why) const {
  auto onePart = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return std::vector<ProgramPart>(1);
  };
  if (jobs <= 1) return onePart("DEVDL_JOBS=1");
  if (!hasTranslatorHelper()) return onePart("this build has no helper (devdl-translate) to build parts in");
  std::vector<CodeGraph> graphs;
  for (const LinkInput &input : inputs) {
    if (input.image->format != ImageFormat::SpirV) return onePart(input.label + " is a native binary, compiled already");
    if (!input.image->unvalidated.empty())
      return onePart(input.label + ": devdl's SPIR-V validator could not vouch for it (" +
                     std::string(input.image->unvalidated) + "), and devdl cuts no such module into parts");
    if (input.specConstants && !input.specConstants->empty())
      return onePart(input.label + " has specialization constants set");
    auto graph = readers::spirvCodeGraph(input.image->bytes);
    if (!graph) return onePart(input.label + ": " + llvm::toString(graph.takeError()));
    graphs.push_back(std::move(*graph));
  }
  return partitionKernels(graphs, jobs, {}, why);
}

llvm::Expected<std::unique_ptr<ProgramOfParts>> Linker::linkParts(std::span<const LinkInput> inputs,
                                                                  std::span<const ProgramPart> parts) const {
  // A kernel's body another image calls keeps its export in every part.
  llvm::StringSet<> imported;
  for (const LinkInput &input : inputs)
    for (const Symbol &symbol : input.image->symbols)
      if (symbol.kind == SymbolKind::Import) imported.insert(symbol.name);
  std::vector<std::vector<uint32_t>> words;
  for (const LinkInput &input : inputs) {
    std::vector<uint32_t> &w = words.emplace_back(input.image->bytes.size() / 4);
    std::memcpy(w.data(), input.image->bytes.data(), w.size() * 4);
  }
  std::vector<std::optional<llvm::Expected<std::unique_ptr<Program>>>> linked(parts.size());
  {
    std::vector<std::jthread> threads;
    for (size_t p = 0; p < parts.size(); ++p)
      threads.emplace_back([&, p] {
        translator::Request request;
        request.operation = translator::Operation::BuildOpenCl;
        request.device = device_.identity;
        for (size_t i = 0; i < inputs.size(); ++i) {
          auto module = spirvForPart(words[i], parts, p, imported);
          if (!module) {
            linked[p].emplace(inImage(module.takeError(), inputs[i].label));
            return;
          }
          request.modules.emplace_back(inputs[i].label, std::move(*module));
        }
        auto binary = translateInHelper(request);
        if (!binary) {
          linked[p].emplace(binary.takeError());
          return;
        }
        // This process's build of the binary: Intel's runtime loads it in milliseconds.
        linked[p].emplace(
            builder_.buildBinary(*binary, device_.options, "part " + std::to_string(p) + ", built in a helper"));
      });
  }
  std::vector<std::unique_ptr<Program>> programs;
  std::vector<std::vector<std::string>> names;
  llvm::Error first = llvm::Error::success();
  for (size_t p = 0; p < parts.size(); ++p) {
    llvm::Expected<std::unique_ptr<Program>> &program = *linked[p];
    if (!program) {
      if (first) llvm::consumeError(program.takeError());
      else first = program.takeError();
      continue;
    }
    programs.push_back(std::move(*program));
    std::vector<std::string> &held = names.emplace_back(parts[p].kernels);
    held.insert(held.end(), parts[p].variables.begin(), parts[p].variables.end());
  }
  if (first) return first;
  return std::make_unique<ProgramOfParts>(std::move(programs), std::move(names));
}

}  // namespace devdl::backend::opencl
