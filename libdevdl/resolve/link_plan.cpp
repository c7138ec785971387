#include "resolve/link_plan.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/StringRef.h>

#include <algorithm>

namespace devdl {

LinkPlan computeLinkPlan(std::span<const uint32_t> roots, std::span<const DeviceImage *const> images,
                         Resolver resolve) {
  LinkPlan plan;
  llvm::DenseSet<uint32_t> inPlan;
  for (uint32_t root : roots)
    if (inPlan.insert(root).second) plan.images.push_back(root);
  // plan.images doubles as the worklist: images are appended as they are found.
  for (size_t next = 0; next < plan.images.size(); ++next) {
    const uint32_t importer = plan.images[next];
    for (const Symbol &s : images[importer]->symbols) {
      if (s.kind != SymbolKind::Import) continue;
      const std::optional<uint32_t> definer = resolve(s.name, importer);
      if (!definer) {
        if (!s.weak) plan.unresolved.push_back({s.name, importer});  // a weak one is the driver's
        continue;
      }
      plan.bindings.push_back({s.name, importer, *definer});
      if (inPlan.insert(*definer).second) plan.images.push_back(*definer);
    }
  }
  // Which definition of each name the link sees: the bound one, else the first in plan order.
  llvm::DenseMap<llvm::StringRef, const Binding *> bound;
  for (const Binding &b : plan.bindings) {
    auto [it, first] = bound.try_emplace(llvm::StringRef(b.symbol.data(), b.symbol.size()), &b);
    if (!first && it->second->definer != b.definer) plan.conflicts.push_back({b.symbol, *it->second, b});
  }
  llvm::DenseMap<llvm::StringRef, uint32_t> seen;
  plan.interposed.resize(plan.images.size());
  for (size_t i = 0; i < plan.images.size(); ++i) {
    const uint32_t id = plan.images[i];
    for (const Symbol &s : images[id]->symbols) {
      if (s.kind != SymbolKind::Function && s.kind != SymbolKind::Variable) continue;
      const llvm::StringRef name(s.name.data(), s.name.size());
      auto binding = bound.find(name);
      const bool used = binding != bound.end() ? binding->second->definer == id : seen.try_emplace(name, id).first->second == id;
      if (!used) plan.interposed[i].push_back(s.name);
    }
    std::sort(plan.interposed[i].begin(), plan.interposed[i].end());
    plan.interposed[i].erase(std::unique(plan.interposed[i].begin(), plan.interposed[i].end()), plan.interposed[i].end());
  }
  return plan;
}

}  // namespace devdl
