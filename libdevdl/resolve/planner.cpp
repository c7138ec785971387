#include "resolve/planner.h"

#include "support/error.h"

#include <llvm/ADT/STLExtras.h>

#include <set>

namespace devdl {

std::optional<uint32_t> Planner::bind(std::string_view symbol, uint32_t importer,
                                      const llvm::DenseSet<uint32_t> &pulled) const {
  const ScopedImage &image = at(importer);
  // Only images of the importer's family link with it.
  return scopes_.resolve(symbol, linkFamily(image.image.format), image.local, [&](uint32_t id) {
    return isCandidate(id) && (at(id).vf.set.empty() || pulled.contains(id));
  });
}

LinkPlan Planner::plan(std::span<const uint32_t> roots) const {
  llvm::DenseSet<uint32_t> pulled(roots.begin(), roots.end());
  std::vector<uint32_t> all(roots.begin(), roots.end());
  // The virtual-function sets' images in the first root's scope, in search order (the global
  // scope's, then its handle's own): indexed once a plan's image asks for a set.
  std::optional<llvm::StringMap<std::vector<uint32_t>>> members;
  auto index = [&] {
    members.emplace();
    auto add = [&](uint32_t id) {
      const VirtualFunctions &vf = at(id).vf;
      if (!vf.set.empty()) (*members)[llvm::StringRef(vf.set.data(), vf.set.size())].push_back(id);
    };
    for (uint32_t id : scopes_.globalOrder()) add(id);
    if (const LocalScope *local = roots.empty() ? nullptr : at(roots.front()).local)
      for (uint32_t id : local->images)
        if (!scopes_.isGlobal(id)) add(id);
  };
  LinkPlan plan;
  for (;;) {
    LinkPlan next = computeLinkPlan(all, images_.pointers(), [&](std::string_view symbol, uint32_t importer) {
      return bind(symbol, importer, pulled);
    });
    next.joined = std::move(plan.joined);
    plan = std::move(next);
    // The sets of the plan's images, until what they pull in asks for nothing more.
    const size_t before = all.size();
    for (uint32_t id : plan.images) {
      if (at(id).vf.calls.empty() && at(id).vf.creates.empty()) continue;
      if (!members) index();
      pullSets(id, *members, pulled, all, plan);
    }
    if (all.size() == before) return plan;
    plan.setProblems.clear();  // found again with what joined
  }
}

void Planner::pullSets(uint32_t image, const llvm::StringMap<std::vector<uint32_t>> &members,
                       llvm::DenseSet<uint32_t> &pulled, std::vector<uint32_t> &into, LinkPlan &plan) const {
  const VirtualFunctions &vf = at(image).vf;
  auto join = [&](uint32_t id, std::string why) {
    if (!pulled.insert(id).second) return;
    into.push_back(id);
    plan.joined.push_back({id, std::move(why)});
  };
  auto of = [&](std::string_view set) -> std::span<const uint32_t> {
    auto it = members.find(llvm::StringRef(set.data(), set.size()));
    return it == members.end() ? std::span<const uint32_t>() : std::span<const uint32_t>(it->second);
  };
  const std::string &label = at(image).label;
  // Calls: every image of the set (not its dummies); each must be one the device takes.
  for (std::string_view set : vf.calls) {
    bool any = false;
    for (uint32_t id : of(set)) {
      if (at(id).vf.dummy) continue;
      any = true;
      if (isCandidate(id))
        join(id, "calls set " + std::string(set));
      else
        plan.setProblems.push_back(label + " calls virtual functions set " + std::string(set) + ", but " +
                                   at(id).label + " cannot be linked here: " + at(id).whyNotAt(place_));
    }
    if (!any)
      plan.setProblems.push_back(label + " calls virtual functions set " + std::string(set) +
                                 ", which no image in its scope holds");
  }
  // Creates: each image of the set the device takes, else the set's dummy (the one from the same
  // file where there is one): objects can be made whatever the device lacks.
  for (std::string_view set : vf.creates) {
    for (uint32_t id : of(set)) {
      const ScopedImage &real = at(id);
      if (real.vf.dummy) continue;
      if (isCandidate(id)) {
        join(id, "creates set " + std::string(set));
        continue;
      }
      std::optional<uint32_t> dummy;
      for (uint32_t other : of(set)) {
        const ScopedImage &d = at(other);
        if (!d.vf.dummy || !isCandidate(other)) continue;
        if (!dummy || (d.file == real.file && at(*dummy).file != real.file)) dummy = other;
      }
      if (dummy)
        join(*dummy, "creates set " + std::string(set) + ": dummy, as " + real.label + " cannot be linked here: " +
                         real.whyNotAt(place_));
      else
        plan.setProblems.push_back(label + " creates virtual functions set " + std::string(set) + ", but " +
                                   real.label + " cannot be linked here (" + real.whyNotAt(place_) +
                                   ") and no dummy image of the set is in its scope");
    }
  }
}

std::vector<Planner::Importer> Planner::importersOf(const LinkPlan &plan,
                                                    llvm::function_ref<bool(uint32_t)> sameDevice) const {
  std::vector<Importer> found;
  std::set<uint32_t> inPlan(plan.images.begin(), plan.images.end()), seen;
  const llvm::DenseSet<uint32_t> pulledIn(plan.images.begin(), plan.images.end());  // sets' images the plan has
  // A worklist over the exports of what the program holds.
  std::vector<uint32_t> work(plan.images.begin(), plan.images.end());
  while (!work.empty()) {
    const uint32_t id = work.back();
    work.pop_back();
    for (const Symbol &s : at(id).image.symbols) {
      if (s.kind == SymbolKind::Import) continue;
      for (uint32_t importer : images_.importersOf(s.name)) {
        if (inPlan.count(importer) || !seen.insert(importer).second) continue;
        if (!isCandidate(importer) || !sameDevice(importer)) continue;
        if (bind(s.name, importer, pulledIn) != id) continue;  // its import binds elsewhere
        const uint32_t roots[] = {importer};
        LinkPlan own = this->plan(roots);
        if (!own.unresolved.empty() || !own.conflicts.empty() || !own.setProblems.empty())
          continue;  // LAZY: its own business
        for (uint32_t member : own.images)
          if (inPlan.insert(member).second) work.push_back(member);
        found.push_back({importer, std::move(own)});
      }
    }
  }
  return found;
}

std::string Planner::whyUnresolved(std::string_view symbol, uint32_t importer) const {
  // A definition the importer could link with, in an image the device cannot take (or no
  // device at all): that is the reason to give.
  const ScopedImage &image = at(importer);
  const LinkFamily family = linkFamily(image.image.format);
  const SymbolIndex *local = image.local ? &image.local->index : nullptr;
  for (const SymbolIndex *scope : {&scopes_.global(), local}) {
    if (!scope) continue;
    for (const Definition &d : scope->definitions(symbol)) {
      if (d.family != family) continue;
      const ScopedImage &definer = at(d.image);
      if (isCandidate(d.image) && !definer.vf.set.empty())
        return " (" + definer.label + " defines it, in virtual functions set " + std::string(definer.vf.set) +
               ", which no image of the program calls or creates)";
      return " (" + definer.label + " defines it, but " + definer.whyNotAt(place_) + ")";
    }
  }
  return "";
}

llvm::Error Planner::unresolvedError(const LinkPlan &plan) const {
  if (plan.unresolved.empty() && plan.setProblems.empty()) return llvm::Error::success();
  // The first few, and how many more: a module of a million imports is no million-line error
  // (device_dlerror keeps it, and the tools print it).
  std::string message;
  for (size_t i = 0; i < plan.unresolved.size() && i < kUnresolvedShown; ++i) {
    const auto &u = plan.unresolved[i];
    message += (message.empty() ? "" : "\n") + at(u.importer).label + ": undefined device symbol `" +
               std::string(u.symbol) + "`" + whyUnresolved(u.symbol, u.importer);
  }
  if (plan.unresolved.size() > kUnresolvedShown)
    message += "\n... and " + std::to_string(plan.unresolved.size() - kUnresolvedShown) + " more undefined device symbols";
  for (const std::string &problem : plan.setProblems) message += (message.empty() ? "" : "\n") + problem;
  return fail(ErrorCode::Unresolved, message);
}

llvm::Error Planner::conflictError(const LinkPlan &plan) const {
  if (plan.conflicts.empty()) return llvm::Error::success();
  const LinkPlan::Conflict &c = plan.conflicts.front();
  return fail(ErrorCode::Unsupported,
              "`" + std::string(c.symbol) + "` is bound to two definitions in one program: " +
                  at(c.first.importer).label + " uses " + at(c.first.definer).label + "'s, " +
                  at(c.second.importer).label + " uses " + at(c.second.definer).label +
                  "'s (a program has one definition of each name)");
}

std::string Planner::text(const LinkPlan &plan) const {
  std::string text;
  for (const Binding &b : plan.bindings)
    text += "  " + std::string(b.symbol) + " (" + at(b.importer).label + ") -> " + at(b.definer).label + "\n";
  for (const auto &u : plan.unresolved)
    text += "  " + std::string(u.symbol) + " (" + at(u.importer).label + ") -> undefined\n";
  for (const LinkPlan::Joined &j : plan.joined) text += "  " + at(j.image).label + ": " + j.why + "\n";
  for (const std::string &problem : plan.setProblems) text += "  " + problem + "\n";
  return text;
}

}  // namespace devdl
