#include "resolve/link_plan.h"

#include <llvm/ADT/DenseSet.h>

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
        plan.unresolved.push_back({s.name, importer});
        continue;
      }
      plan.bindings.push_back({s.name, importer, *definer});
      if (inPlan.insert(*definer).second) plan.images.push_back(*definer);
    }
  }
  return plan;
}

}  // namespace devdl
