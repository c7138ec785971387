#include "backend/partition.h"

#include <llvm/ADT/StringMap.h>

#include <algorithm>
#include <cstdint>
#include <numeric>

namespace devdl {

namespace {

// One name of the program, with every definition of it merged: binding is by name, and where
// images both define one (weak, or local to each) they are taken as one, which can only join parts.
struct Node {
  std::string_view name;
  SymbolKind kind;
  uint64_t size = 0;
  std::vector<uint32_t> uses;  // calls and references, to names the program defines
  bool shared = false;         // a variable, or code whose address is taken: one instance for all
};

struct Components {
  std::vector<uint32_t> parent;
  explicit Components(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  uint32_t find(uint32_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  void join(uint32_t a, uint32_t b) {
    a = find(a), b = find(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);  // the root is the earliest kernel
  }
};

}  // namespace

std::vector<ProgramPart> partitionKernels(std::span<const CodeGraph> graphs, size_t parts,
                                          std::span<const std::pair<std::string_view, std::string_view>> together,
                                          std::string *why) {
  llvm::StringMap<uint32_t> index;
  std::vector<Node> nodes;
  for (const CodeGraph &graph : graphs)
    for (const CodeGraph::Definition &d : graph.definitions) {
      auto [it, added] = index.try_emplace(d.name, static_cast<uint32_t>(nodes.size()));
      if (added) nodes.push_back(Node{it->first(), d.kind, 0, {}, false});
      Node &node = nodes[it->second];
      node.size += d.size;
      if (d.kind == SymbolKind::Variable) node.kind = SymbolKind::Variable, node.shared = true;
      else if (d.kind == SymbolKind::Kernel && node.kind == SymbolKind::Function) node.kind = SymbolKind::Kernel;
    }
  for (const CodeGraph &graph : graphs)
    for (const CodeGraph::Definition &d : graph.definitions) {
      Node &node = nodes[index.find(d.name)->second];
      for (const std::string &name : d.calls)
        if (auto it = index.find(name); it != index.end()) node.uses.push_back(it->second);
      for (const std::string &name : d.refers)
        if (auto it = index.find(name); it != index.end()) {
          node.uses.push_back(it->second);
          nodes[it->second].shared = true;  // a variable already; code: its address is taken
        }
    }
  std::vector<uint32_t> kernels;  // node indices, in definition order
  for (uint32_t n = 0; n < nodes.size(); ++n)
    if (nodes[n].kind == SymbolKind::Kernel) kernels.push_back(n);

  auto onePart = [&] {
    if (why && parts > 1)
      *why = kernels.size() <= 1 ? "one kernel"
                                 : "its kernels reach variables, or functions whose address is taken, in common";
    ProgramPart part;
    for (const Node &node : nodes) {
      if (node.kind == SymbolKind::Kernel) part.kernels.emplace_back(node.name);
      if (node.kind == SymbolKind::Variable) part.variables.emplace_back(node.name);
      part.size += node.size;
    }
    return std::vector<ProgramPart>{std::move(part)};
  };
  if (parts <= 1 || kernels.size() <= 1) return onePart();

  // What each kernel reaches: its code's size, and the shared names, each joining the kernels
  // that reach it. `owner`: the first kernel (by position in `kernels`) to reach a shared name.
  Components components(kernels.size());
  std::vector<uint64_t> weight(kernels.size());
  std::vector<int64_t> owner(nodes.size(), -1);
  std::vector<uint32_t> seen(nodes.size(), 0), stack;
  for (uint32_t k = 0; k < kernels.size(); ++k) {
    stack.assign(1, kernels[k]);
    seen[kernels[k]] = k + 1;
    while (!stack.empty()) {
      const uint32_t n = stack.back();
      stack.pop_back();
      weight[k] += nodes[n].size;
      if (nodes[n].shared) {
        if (owner[n] < 0) owner[n] = k;
        else components.join(k, static_cast<uint32_t>(owner[n]));
      }
      for (uint32_t use : nodes[n].uses)
        if (seen[use] != k + 1) seen[use] = k + 1, stack.push_back(use);
    }
  }
  std::vector<int64_t> position(nodes.size(), -1);  // a kernel's node -> its position in `kernels`
  for (uint32_t k = 0; k < kernels.size(); ++k) position[kernels[k]] = k;
  for (const auto &[a, b] : together) {
    auto ia = index.find(a), ib = index.find(b);
    if (ia != index.end() && ib != index.end() && position[ia->second] >= 0 && position[ib->second] >= 0)
      components.join(static_cast<uint32_t>(position[ia->second]), static_cast<uint32_t>(position[ib->second]));
  }

  // The components, heaviest first, each to the lightest part so far (ties: the earlier).
  std::vector<uint32_t> roots;
  std::vector<uint64_t> componentWeight(kernels.size(), 0);
  for (uint32_t k = 0; k < kernels.size(); ++k) {
    const uint32_t root = components.find(k);
    if (root == k) roots.push_back(k);
    componentWeight[root] += weight[k];
  }
  if (roots.size() == 1) return onePart();
  std::stable_sort(roots.begin(), roots.end(),
                   [&](uint32_t a, uint32_t b) { return componentWeight[a] > componentWeight[b]; });
  const size_t count = std::min(parts, roots.size());
  std::vector<uint64_t> load(count, 0);
  std::vector<uint32_t> binOf(kernels.size(), 0);  // of a component's root
  for (uint32_t root : roots) {
    const size_t bin = std::min_element(load.begin(), load.end()) - load.begin();
    load[bin] += componentWeight[root];
    binOf[root] = static_cast<uint32_t>(bin);
  }
  // Parts in the order of their first kernels: the same plan gives the same parts.
  std::vector<int64_t> partOfBin(count, -1);
  std::vector<ProgramPart> result;
  std::vector<uint32_t> partOfKernel(kernels.size());
  for (uint32_t k = 0; k < kernels.size(); ++k) {
    const uint32_t bin = binOf[components.find(k)];
    if (partOfBin[bin] < 0) partOfBin[bin] = static_cast<int64_t>(result.size()), result.emplace_back();
    partOfKernel[k] = static_cast<uint32_t>(partOfBin[bin]);
    ProgramPart &part = result[partOfKernel[k]];
    part.kernels.emplace_back(nodes[kernels[k]].name);
    part.size += weight[k];
  }
  for (uint32_t n = 0; n < nodes.size(); ++n)
    if (nodes[n].kind == SymbolKind::Variable)
      result[owner[n] < 0 ? 0 : partOfKernel[owner[n]]].variables.emplace_back(nodes[n].name);
  return result;
}

}  // namespace devdl
