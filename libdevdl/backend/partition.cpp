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

// The program's names, each a node, and the kernels among them.
struct NameGraph {
  llvm::StringMap<uint32_t> index;  // name -> its node
  std::vector<Node> nodes;
  std::vector<uint32_t> kernels;  // node indices, in definition order
  std::vector<int64_t> positionOf;  // by node: a kernel's position in `kernels`, -1 for the others
};

NameGraph buildNameGraph(std::span<const CodeGraph> graphs) {
  NameGraph graph;
  auto &[index, nodes, kernels, positionOf] = graph;
  for (const CodeGraph &code : graphs)
    for (const CodeGraph::Definition &d : code.definitions) {
      auto [it, added] = index.try_emplace(d.name, static_cast<uint32_t>(nodes.size()));
      if (added) nodes.push_back(Node{it->first(), d.kind, 0, {}, false});
      Node &node = nodes[it->second];
      node.size += d.size;
      if (d.kind == SymbolKind::Variable) node.kind = SymbolKind::Variable, node.shared = true;
      else if (d.kind == SymbolKind::Kernel && node.kind == SymbolKind::Function) node.kind = SymbolKind::Kernel;
    }
  for (const CodeGraph &code : graphs)
    for (const CodeGraph::Definition &d : code.definitions) {
      Node &node = nodes[index.find(d.name)->second];
      for (const std::string &name : d.calls)
        if (auto it = index.find(name); it != index.end()) node.uses.push_back(it->second);
      for (const std::string &name : d.refers)
        if (auto it = index.find(name); it != index.end()) {
          node.uses.push_back(it->second);
          nodes[it->second].shared = true;  // a variable already; code: its address is taken
        }
    }
  positionOf.assign(nodes.size(), -1);
  for (uint32_t n = 0; n < nodes.size(); ++n)
    if (nodes[n].kind == SymbolKind::Kernel) positionOf[n] = static_cast<int64_t>(kernels.size()), kernels.push_back(n);
  return graph;
}

// Every kernel and variable in one part; with `why` where more were asked, why.
std::vector<ProgramPart> onePart(const NameGraph &graph, size_t parts, std::string *why) {
  if (why && parts > 1)
    *why = graph.kernels.size() <= 1 ? "one kernel"
                                     : "its kernels reach variables, or functions whose address is taken, in common";
  ProgramPart part;
  for (const Node &node : graph.nodes) {
    if (node.kind == SymbolKind::Kernel) part.kernels.emplace_back(node.name);
    if (node.kind == SymbolKind::Variable) part.variables.emplace_back(node.name);
    part.size += node.size;
  }
  return std::vector<ProgramPart>{std::move(part)};
}

// What each kernel reaches: its code's size, and the shared names, each joining the kernels
// that reach it. `owner`: the first kernel (by position in `kernels`) to reach a shared name.
struct Reach {
  Components components;
  std::vector<uint64_t> weight;  // by kernel
  std::vector<int64_t> owner;    // by node
};

// `joinVariables`: a variable joins the kernels that reach it (else only code whose address is
// taken does; a variable's `owner` is set either way).
Reach reachFromKernels(const NameGraph &graph, bool joinVariables = true) {
  const std::vector<uint32_t> &kernels = graph.kernels;
  const std::vector<Node> &nodes = graph.nodes;
  Reach reach{Components(kernels.size()), std::vector<uint64_t>(kernels.size()),
              std::vector<int64_t>(nodes.size(), -1)};
  std::vector<uint32_t> seen(nodes.size(), 0), stack;
  for (uint32_t k = 0; k < kernels.size(); ++k) {
    stack.assign(1, kernels[k]);
    seen[kernels[k]] = k + 1;
    while (!stack.empty()) {
      const uint32_t n = stack.back();
      stack.pop_back();
      reach.weight[k] += nodes[n].size;
      if (nodes[n].shared) {
        if (reach.owner[n] < 0) reach.owner[n] = k;
        else if (joinVariables || nodes[n].kind != SymbolKind::Variable)
          reach.components.join(k, static_cast<uint32_t>(reach.owner[n]));
      }
      for (uint32_t use : nodes[n].uses)
        if (seen[use] != k + 1) seen[use] = k + 1, stack.push_back(use);
    }
  }
  return reach;
}

// Joins each pair of kernels `together` names, by their positions in `kernels`.
void joinTogether(const NameGraph &graph, std::span<const std::pair<std::string_view, std::string_view>> together,
                  Components &components) {
  const std::vector<int64_t> &position = graph.positionOf;
  for (const auto &[a, b] : together) {
    auto ia = graph.index.find(a), ib = graph.index.find(b);
    if (ia != graph.index.end() && ib != graph.index.end() && position[ia->second] >= 0 && position[ib->second] >= 0)
      components.join(static_cast<uint32_t>(position[ia->second]), static_cast<uint32_t>(position[ib->second]));
  }
}

// The components, heaviest first, each to the lightest part so far (ties: the earlier): the bin of
// each component's root, by kernel. Empty where the kernels are one component.
std::vector<uint32_t> binComponents(Reach &reach, size_t parts) {
  const size_t kernels = reach.weight.size();
  std::vector<uint32_t> roots;
  std::vector<uint64_t> componentWeight(kernels, 0);
  for (uint32_t k = 0; k < kernels; ++k) {
    const uint32_t root = reach.components.find(k);
    if (root == k) roots.push_back(k);
    componentWeight[root] += reach.weight[k];
  }
  if (roots.size() == 1) return {};
  std::stable_sort(roots.begin(), roots.end(),
                   [&](uint32_t a, uint32_t b) { return componentWeight[a] > componentWeight[b]; });
  std::vector<uint64_t> load(std::min(parts, roots.size()), 0);
  std::vector<uint32_t> binOf(kernels, 0);  // of a component's root
  for (uint32_t root : roots) {
    const size_t bin = std::min_element(load.begin(), load.end()) - load.begin();
    load[bin] += componentWeight[root];
    binOf[root] = static_cast<uint32_t>(bin);
  }
  return binOf;
}

// Parts in the order of their first kernels: the same plan gives the same parts.
std::vector<ProgramPart> collectParts(const NameGraph &graph, Reach &reach, std::span<const uint32_t> binOf) {
  const std::vector<uint32_t> &kernels = graph.kernels;
  std::vector<int64_t> partOfBin(kernels.size(), -1);  // by bin: no more bins than kernels
  std::vector<ProgramPart> result;
  std::vector<uint32_t> partOfKernel(kernels.size());
  for (uint32_t k = 0; k < kernels.size(); ++k) {
    const uint32_t bin = binOf[reach.components.find(k)];
    if (partOfBin[bin] < 0) partOfBin[bin] = static_cast<int64_t>(result.size()), result.emplace_back();
    partOfKernel[k] = static_cast<uint32_t>(partOfBin[bin]);
    ProgramPart &part = result[partOfKernel[k]];
    part.kernels.emplace_back(graph.nodes[kernels[k]].name);
    part.size += reach.weight[k];
  }
  for (uint32_t n = 0; n < graph.nodes.size(); ++n)
    if (graph.nodes[n].kind == SymbolKind::Variable)
      result[reach.owner[n] < 0 ? 0 : partOfKernel[reach.owner[n]]].variables.emplace_back(graph.nodes[n].name);
  return result;
}

// The kernels, by position, of the components `roots` name: a kernel's own, a variable's first
// kernel's. Empty where none is either.
std::vector<bool> kernelsOfRoots(const NameGraph &graph, Reach &reach, std::span<const std::string_view> roots) {
  std::vector<bool> rootComponent(graph.kernels.size(), false), inPart(graph.kernels.size(), false);
  bool any = false;
  for (std::string_view root : roots) {
    auto it = graph.index.find(root);
    if (it == graph.index.end()) continue;
    const int64_t k = graph.nodes[it->second].kind == SymbolKind::Kernel ? graph.positionOf[it->second] : reach.owner[it->second];
    if (k < 0) continue;
    rootComponent[reach.components.find(static_cast<uint32_t>(k))] = any = true;
  }
  if (!any) return {};
  for (uint32_t k = 0; k < graph.kernels.size(); ++k) inPart[k] = rootComponent[reach.components.find(k)];
  return inPart;
}

}  // namespace

std::vector<ProgramPart> partReaching(std::span<const CodeGraph> graphs, std::span<const std::string_view> roots,
                                      bool joinVariables) {
  const NameGraph graph = buildNameGraph(graphs);
  Reach reach = reachFromKernels(graph, joinVariables);
  const std::vector<bool> inPart = kernelsOfRoots(graph, reach, roots);
  if (inPart.empty()) return {};
  // What the part's kernels reach, each name once.
  std::vector<bool> reached(graph.nodes.size(), false);
  std::vector<uint32_t> stack;
  for (uint32_t k = 0; k < graph.kernels.size(); ++k)
    if (inPart[k]) reached[graph.kernels[k]] = true, stack.push_back(graph.kernels[k]);
  std::vector<ProgramPart> parts(2);
  while (!stack.empty()) {
    const uint32_t n = stack.back();
    stack.pop_back();
    parts[0].size += graph.nodes[n].size;
    for (uint32_t use : graph.nodes[n].uses)
      if (!reached[use]) reached[use] = true, stack.push_back(use);
  }
  for (uint32_t n = 0; n < graph.nodes.size(); ++n) {
    const Node &node = graph.nodes[n];
    ProgramPart &into = parts[reached[n] ? 0 : 1];
    if (node.kind == SymbolKind::Kernel) into.kernels.emplace_back(node.name);
    else if (node.kind == SymbolKind::Variable) into.variables.emplace_back(node.name);
    else into.functions.emplace_back(node.name);
  }
  return parts;
}

std::vector<ProgramPart> partitionKernels(std::span<const CodeGraph> graphs, size_t parts,
                                          std::span<const std::pair<std::string_view, std::string_view>> together,
                                          std::string *why) {
  const NameGraph graph = buildNameGraph(graphs);
  if (parts <= 1 || graph.kernels.size() <= 1) return onePart(graph, parts, why);
  Reach reach = reachFromKernels(graph);
  joinTogether(graph, together, reach.components);
  const std::vector<uint32_t> binOf = binComponents(reach, parts);
  if (binOf.empty()) return onePart(graph, parts, why);
  return collectParts(graph, reach, binOf);
}

}  // namespace devdl
