// The global scope joined and left, and the definitions a join hides said.
#include "loader/global_scope.h"

#include "loader/loader_lock.h"
#include "resolve/planner.h"
#include "support/debug.h"

namespace devdl {

void GlobalScope::join(std::span<const uint32_t> ids) {
  // Programs linked before stay as they were linked, as the host loader's bindings do.
  for (uint32_t id : ids)
    if (scopes_.join(id, images_[id].image) && Debug::get().on(Debug::Libs))
      Debug::get().print("global scope += " + images_[id].label);
  Generation::move();
  // The process's first scope is reported once DEVDL_PRELOAD has taken its place in it.
  if (reportJoins_) reportDuplicates(ids);
}

void GlobalScope::leave(std::span<const uint32_t> ids) {
  scopes_.leave(ids, images_.pointers());
  Generation::move();
}

void GlobalScope::reportDuplicates(std::span<const uint32_t> ids) {
  if (!Debug::get().on(Debug::Symbols)) return;
  const Planner planner(images_, scopes_, 0);
  for (uint32_t id : ids) {
    if (!images_.contains(id) || !images_[id].loaded) continue;
    if (candidacies_.undecided(id)) {
      unreported_.push_back(id);
      continue;
    }
    for (const Symbol &s : images_[id].image.symbols) {
      if (s.kind == SymbolKind::Import || !planner.isCandidate(id)) continue;
      const Definition *first =
          firstCandidate(scopes_.global().definitions(s.name), [&](uint32_t image) { return planner.isCandidate(image); },
                         linkFamily(images_[id].image.format));
      if (first && first->image != id)
        Debug::get().print("duplicate definition of `" + std::string(s.name) + "` in " + images_[id].label +
                           " (the one in " + images_[first->image].label + " is used)");
    }
  }
}

void GlobalScope::reportWaiting() {
  if (unreported_.empty()) return;
  const std::vector<uint32_t> ids = std::move(unreported_);
  unreported_.clear();
  reportDuplicates(ids);
}

}  // namespace devdl
