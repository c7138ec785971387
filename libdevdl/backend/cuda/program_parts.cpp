#include "backend/cuda/program_parts.h"
#include "backend/cuda/architecture.h"
#include "image/code_graph.h"
#include "image/readers.h"
#include "support/error.h"

#include <llvm/ADT/StringRef.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <thread>

namespace devdl::backend::cuda {

std::vector<ProgramPart> planLtoParts(std::span<const JitInput> inputs, int sm, unsigned jobs, std::string *why) {
  auto onePart = [&](const std::string &reason) {
    if (why) *why = reason;
    return std::vector<ProgramPart>(1);
  };
  if (jobs <= 1) return onePart("DEVDL_JOBS=1");
  std::vector<CodeGraph> graphs;
  for (const JitInput &input : inputs) {
    if (input.kind != JitInputKind::Fatbin) return onePart(*input.label + " is no LTO-IR, linked as it is compiled");
    Storage scratch;
    auto members = readers::listFatbinMembers(input.data, scratch);
    if (!members) return onePart(*input.label + ": " + llvm::toString(members.takeError()));
    // The PTX of the highest version for the device: what nvcc compiled from the LTO-IR's source.
    const readers::FatbinMember *ptx = nullptr;
    auto version = [](const readers::FatbinMember &m) { return llvm::StringRef(m.arch).drop_front(8); };  // compute_
    for (const readers::FatbinMember &m : *members)
      if (m.format == ImageFormat::Ptx && m.readable() && runsOn(ImageFormat::Ptx, m.arch, sm) &&
          (!ptx || version(m).compare_numeric(version(*ptx)) > 0))
        ptx = &m;
    if (!ptx) return onePart(*input.label + " has no readable PTX beside its LTO-IR to say what its code refers to");
    auto text = readers::fatbinMemberImage(*ptx, scratch);
    auto graph = text ? readers::ptxCodeGraph(*text) : text.takeError();
    if (!graph) return onePart(*input.label + ": its PTX: " + llvm::toString(graph.takeError()));
    graphs.push_back(std::move(*graph));
  }
  // nvJitLink keeps every kernel whose name begins with one it is given: such names, next to each
  // other once sorted, go together.
  std::vector<std::string_view> kernels;
  for (const CodeGraph &graph : graphs)
    for (const CodeGraph::Definition &d : graph.definitions)
      if (d.kind == SymbolKind::Kernel) kernels.push_back(d.name);
  std::sort(kernels.begin(), kernels.end());
  std::vector<std::pair<std::string_view, std::string_view>> together;
  for (size_t i = 0; i < kernels.size(); ++i)
    for (size_t j = i + 1; j < kernels.size() && kernels[j].substr(0, kernels[i].size()) == kernels[i]; ++j)
      together.emplace_back(kernels[i], kernels[j]);
  return partitionKernels(graphs, jobs, together, why);
}

std::vector<std::string> ptxasThreads(unsigned jobs) {
  // ptxas compiles a module's functions on as many threads: "minimal (if any) impact on
  // performance of the compiled binary", says its --help (bench_lto's kernel times unchanged).
  if (jobs <= 1) return {};
  return {"-Xptxas=--split-compile=" + std::to_string(jobs)};
}

namespace {

std::vector<std::string> partOptions(const ProgramPart &part, unsigned jobs) {
  std::vector<std::string> options = ptxasThreads(jobs);
  for (const std::string &kernel : part.kernels) options.push_back("-kernels-used=" + kernel);
  for (const std::string &variable : part.variables) options.push_back("-variables-used=" + variable);
  options.push_back("-optimize-unused-variables");
  return options;
}

}  // namespace

llvm::Expected<std::vector<PartModule>> linkLtoParts(const NvJitLinkFile &file, std::span<const JitInput> inputs,
                                                     int sm, std::span<const ProgramPart> parts, unsigned jobs,
                                                     std::vector<std::string> *times) {
  std::vector<std::optional<llvm::Expected<std::string>>> linked(parts.size());
  if (times) times->assign(parts.size(), "");
  {
    std::vector<std::jthread> threads;
    for (size_t i = 0; i < parts.size(); ++i)
      threads.emplace_back([&, i] {
        linked[i].emplace(
            linkWithNvJitLink(file, inputs, sm, true, partOptions(parts[i], jobs), times ? &(*times)[i] : nullptr));
      });
  }
  std::vector<PartModule> modules;
  llvm::Error first = llvm::Error::success();
  for (size_t i = 0; i < parts.size(); ++i) {
    llvm::Expected<std::string> &cubin = *linked[i];
    if (!cubin) {
      if (first) llvm::consumeError(cubin.takeError());
      else first = cubin.takeError();
      continue;
    }
    PartModule &module = modules.emplace_back(PartModule{std::move(*cubin), parts[i].kernels});
    module.names.insert(module.names.end(), parts[i].variables.begin(), parts[i].variables.end());
  }
  if (first) return first;
  return modules;
}

}  // namespace devdl::backend::cuda
