// A kernel's program: its image's imports resolved over the scopes into a link plan, the plan's
// program from the program cache (in memory, else the binary store, else linked), linked with
// the loaded images that import from it so that a library's code is built once. Builds run with
// the loader's lock let go, one per program at a time.
#include "image/aspects.h"
#include "image/virtual_functions.h"
#include "loader/loader.h"
#include "support/debug.h"
#include "support/error.h"
#include "support/waiting.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/Support/FormatVariadic.h>

#include <algorithm>
#include <deque>
#include <set>

namespace devdl {

bool Loader::deviceTakes(uint32_t id) const {
  // Like the seed's urDeviceSelectBinary check: an image the device cannot take (a cubin on
  // OpenCL, a cubin for another GPU generation) never satisfies an import, whatever its names.
  // Unknown ones are judged before anything resolves; one arriving meanwhile is not taken yet.
  return images_[id].candidacy == LoadedImage::Candidacy::Yes;
}

std::pair<LoadedImage::Candidacy, std::string> Loader::judgment(const DeviceImage &image) {
  std::string why;
  backend::Device *device = devices_.forImage(image, &why);
  if (!device || !device->accepts(image, &why)) return {LoadedImage::Candidacy::No, why};
  // Optional kernel features: an image needing an aspect the device lacks is no candidate.
  auto aspects = requiredAspects(image);
  if (!aspects) return {LoadedImage::Candidacy::No, llvm::toString(aspects.takeError())};
  for (uint32_t aspect : *aspects)
    if (!device->hasAspect(aspect))
      return {LoadedImage::Candidacy::No, "it needs " + aspectWords(aspect) + ", which " + device->description() +
                                              " lacks"};
  return {LoadedImage::Candidacy::Yes, ""};
}

Loader::NewImage Loader::judge(DeviceImage image, bool mayOpenDevice) {
  if (!mayOpenDevice && !devices_.opensNothingFor(image)) return {std::move(image), LoadedImage::Candidacy::Unknown, ""};
  auto [candidacy, why] = judgment(image);
  return {std::move(image), candidacy, std::move(why)};
}

void Loader::judgeUndecided(Lock &lock) {
  llvm::erase_if(undecided_, [&](uint32_t id) {
    return !images_.contains(id) || !images_[id].loaded || images_[id].candidacy != LoadedImage::Candidacy::Unknown;
  });
  if (undecided_.empty()) return;
  const std::vector<uint32_t> ids = std::move(undecided_);
  undecided_.clear();
  for (uint32_t id : ids) images_.hold(id);  // they stay while the lock is let go
  const auto hosts = hostsOf(ids, nullptr);
  std::vector<std::pair<LoadedImage::Candidacy, std::string>> judged;
  lock.release();
  auto pins = pin(hosts);  // the driver reads a native binary's bytes
  for (uint32_t id : ids) judged.push_back(judgment(images_[id].image));  // held, never changed once added
  lock.acquire();
  for (size_t i = 0; i < ids.size(); ++i) {
    LoadedImage &image = images_[ids[i]];
    if (image.loaded && image.candidacy == LoadedImage::Candidacy::Unknown)
      std::tie(image.candidacy, image.whyNot) = std::move(judged[i]);
    images_.release(ids[i]);
  }
  if (pins)
    for (auto &pinned : *pins) released_.push_back(std::move(pinned));
  changed();
}

std::optional<uint32_t> Loader::resolve(std::string_view symbol, uint32_t importer,
                                        const llvm::DenseSet<uint32_t> &pulled) {
  const LoadedImage &image = images_[importer];
  // Only images of the importer's family link with it.
  return scopes_.resolve(symbol, linkFamily(image.image.format), image.owner ? &image.owner->local : nullptr,
                         [&](uint32_t id) {
                           return deviceTakes(id) && (images_[id].vf.set.empty() || pulled.contains(id));
                         });
}

LinkPlan Loader::planFor(std::span<const uint32_t> roots) {
  llvm::DenseSet<uint32_t> pulled(roots.begin(), roots.end());
  std::vector<uint32_t> all(roots.begin(), roots.end());
  // The virtual-function sets' images in the first root's scope, in search order (the global
  // scope's, then its handle's own): indexed once a plan's image asks for a set.
  std::optional<llvm::StringMap<std::vector<uint32_t>>> members;
  auto index = [&] {
    members.emplace();
    auto add = [&](uint32_t id) {
      const VirtualFunctions &vf = images_[id].vf;
      if (!vf.set.empty()) (*members)[llvm::StringRef(vf.set.data(), vf.set.size())].push_back(id);
    };
    for (uint32_t id : scopes_.globalOrder()) add(id);
    if (const Handle *owner = roots.empty() ? nullptr : images_[roots.front()].owner)
      for (uint32_t id : owner->local.images)
        if (!scopes_.isGlobal(id)) add(id);
  };
  LinkPlan plan;
  for (;;) {
    LinkPlan next = computeLinkPlan(all, images_.pointers(), [&](std::string_view symbol, uint32_t importer) {
      return resolve(symbol, importer, pulled);
    });
    next.joined = std::move(plan.joined);
    plan = std::move(next);
    // The sets of the plan's images, until what they pull in asks for nothing more.
    const size_t before = all.size();
    for (uint32_t id : plan.images) {
      if (images_[id].vf.calls.empty() && images_[id].vf.creates.empty()) continue;
      if (!members) index();
      pullSets(id, *members, pulled, all, plan);
    }
    if (all.size() == before) return plan;
    plan.setProblems.clear();  // found again with what joined
  }
}

void Loader::pullSets(uint32_t image, const llvm::StringMap<std::vector<uint32_t>> &members,
                      llvm::DenseSet<uint32_t> &pulled, std::vector<uint32_t> &into, LinkPlan &plan) {
  const VirtualFunctions &vf = images_[image].vf;
  auto join = [&](uint32_t id, std::string why) {
    if (!pulled.insert(id).second) return;
    into.push_back(id);
    plan.joined.push_back({id, std::move(why)});
  };
  auto of = [&](std::string_view set) -> std::span<const uint32_t> {
    auto it = members.find(llvm::StringRef(set.data(), set.size()));
    return it == members.end() ? std::span<const uint32_t>() : std::span<const uint32_t>(it->second);
  };
  const std::string &label = images_[image].label;
  // Calls: every image of the set (not its dummies); each must be one the device takes.
  for (std::string_view set : vf.calls) {
    bool any = false;
    for (uint32_t id : of(set)) {
      if (images_[id].vf.dummy) continue;
      any = true;
      if (deviceTakes(id))
        join(id, "calls set " + std::string(set));
      else
        plan.setProblems.push_back(label + " calls virtual functions set " + std::string(set) + ", but " +
                                   images_[id].label + " cannot be linked here: " + images_[id].whyNot);
    }
    if (!any)
      plan.setProblems.push_back(label + " calls virtual functions set " + std::string(set) +
                                 ", which no image in its scope holds");
  }
  // Creates: each image of the set the device takes, else the set's dummy (the one from the same
  // file where there is one): objects can be made whatever the device lacks.
  for (std::string_view set : vf.creates) {
    for (uint32_t id : of(set)) {
      const LoadedImage &real = images_[id];
      if (real.vf.dummy) continue;
      if (deviceTakes(id)) {
        join(id, "creates set " + std::string(set));
        continue;
      }
      std::optional<uint32_t> dummy;
      for (uint32_t other : of(set)) {
        const LoadedImage &d = images_[other];
        if (!d.vf.dummy || !deviceTakes(other)) continue;
        if (!dummy || (d.file == real.file && images_[*dummy].file != real.file)) dummy = other;
      }
      if (dummy)
        join(*dummy, "creates set " + std::string(set) + ": dummy, as " + real.label + " cannot be linked here: " +
                         real.whyNot);
      else
        plan.setProblems.push_back(label + " creates virtual functions set " + std::string(set) + ", but " +
                                   real.label + " cannot be linked here (" + real.whyNot +
                                   ") and no dummy image of the set is in its scope");
    }
  }
}

std::string Loader::whyUnresolved(std::string_view symbol, uint32_t importer) {
  // A definition the importer could link with, in an image the device cannot take (or no
  // device at all): that is the reason to give.
  const LoadedImage &image = images_[importer];
  const LinkFamily family = linkFamily(image.image.format);
  const SymbolIndex *local = image.owner ? &image.owner->local.index : nullptr;
  for (const SymbolIndex *scope : {&scopes_.global(), local}) {
    if (!scope) continue;
    for (const Definition &d : scope->definitions(symbol)) {
      if (d.family != family) continue;
      const LoadedImage &definer = images_[d.image];
      if (definer.candidacy == LoadedImage::Candidacy::Yes && !definer.vf.set.empty())
        return " (" + definer.label + " defines it, in virtual functions set " + std::string(definer.vf.set) +
               ", which no image of the program calls or creates)";
      return " (" + definer.label + " defines it, but " + definer.whyNot + ")";
    }
  }
  return "";
}

llvm::Error Loader::unresolvedError(const LinkPlan &plan) {
  if (plan.unresolved.empty() && plan.setProblems.empty()) return llvm::Error::success();
  std::string message;
  for (const auto &u : plan.unresolved)
    message += (message.empty() ? "" : "\n") + images_[u.importer].label + ": undefined device symbol `" +
               std::string(u.symbol) + "`" + whyUnresolved(u.symbol, u.importer);
  for (const std::string &problem : plan.setProblems) message += (message.empty() ? "" : "\n") + problem;
  return fail(ErrorCode::Unresolved, message);
}

llvm::Error Loader::conflictError(const LinkPlan &plan) {
  if (plan.conflicts.empty()) return llvm::Error::success();
  const LinkPlan::Conflict &c = plan.conflicts.front();
  return fail(ErrorCode::Unsupported,
              "`" + std::string(c.symbol) + "` is bound to two definitions in one program: " +
                  images_[c.first.importer].label + " uses " + images_[c.first.definer].label + "'s, " +
                  images_[c.second.importer].label + " uses " + images_[c.second.definer].label +
                  "'s (a program has one definition of each name)");
}

std::vector<Loader::HostObject> Loader::hostsOf(std::span<const uint32_t> plan,
                                                const bundle::LoadedBundle *except) const {
  std::vector<HostObject> hosts;
  for (uint32_t id : plan) {
    const bundle::LoadedBundle *host = images_[id].host;
    // The executable is never unloaded.
    if (!host || host == except || host->object.empty()) continue;
    HostObject object{host->object, host->base};
    if (!llvm::is_contained(hosts, object)) hosts.push_back(std::move(object));
  }
  return hosts;
}

std::optional<std::vector<std::shared_ptr<const void>>> Loader::pin(const std::vector<HostObject> &hosts) {
  std::vector<std::shared_ptr<const void>> pins;
  for (const HostObject &host : hosts) {
    auto reference = bundle::ObjectReference::take(host.path, host.base);
    if (!reference) return std::nullopt;
    pins.push_back(std::move(reference));
  }
  return pins;
}

namespace {

// What a build needs once the lock is let go: copies of whatever the loader may change meanwhile.
struct BuildJob {
  struct Plan {
    std::vector<cache::ContentHash> key;
    std::vector<uint32_t> images;
    std::vector<backend::LinkInput> inputs;
  };
  Plan linked, alone;  // with the importers, and the root's plan alone should that not link
  std::vector<cache::LinkedProgram::Use> uses;  // the root's first, then the importers'
  std::deque<backend::SpecConstants> specConstants;
};

}  // namespace

llvm::Expected<cache::LinkedProgram *> Loader::programFor(Lock &lock, uint32_t root) {
  // An image whose definitions the plan interposes is linked as another image would be: its
  // hash in the key takes the names made local too.
  auto keyOf = [&](const LinkPlan &what) {
    std::vector<cache::ContentHash> key;
    for (size_t i = 0; i < what.images.size(); ++i) {
      const cache::ContentHash hash = images_[what.images[i]].hash;
      if (what.hidden[i].empty()) {
        key.push_back(hash);
        continue;
      }
      cache::KeyBuilder builder;
      builder.add(hash.low).add(hash.high);
      for (std::string_view name : what.hidden[i]) builder.add(name);
      const cache::Key withHidden = builder.finish();
      key.push_back({withHidden.low, withHidden.high});
    }
    std::sort(key.begin(), key.end());
    return key;
  };
  // A host object found unloaded while pinning it: the scopes change at the next scan, then the
  // plan is made again. Bounded, for an object that is unloading but still listed.
  constexpr int kPinAttempts = 3;
  int pinAttempts = 0;
  bool scanned = false, built = false;
  auto rescan = [&](const std::string &what) -> llvm::Error {
    scanned = false;
    if (++pinAttempts < kPinAttempts) return llvm::Error::success();
    return fail(ErrorCode::NotFound, what + ": a host object it needs was unloaded meanwhile");
  };
  for (;;) {
    if (!images_.contains(root) || !images_[root].loaded)
      return fail(ErrorCode::NotFound, "the image was unloaded meanwhile");
    // Like the host loader's bindings, a program stays as it was linked while its root is
    // loaded; a new link sees the process as it is now.
    if (cache::LinkedProgram *program = images_[root].program) return program;
    if (!scanned) {
      scanned = true;
      scanProcess(lock);
      continue;
    }
    const std::string label = images_[root].label;
    const uint32_t roots[] = {root};
    LinkPlan plan = planFor(roots);
    if (llvm::Error err = unresolvedError(plan)) return err;
    if (llvm::Error err = conflictError(plan)) return err;
    std::string why;
    backend::Device *dev = devices_.forImage(images_[root].image, &why);  // opened when the image came
    if (!dev) return fail(ErrorCode::Unsupported, label + ": " + why);
    // The same code linked for the same device is the same program, whichever handles or
    // files the images came from (the seed's key: the plan's images, sorted). A program that
    // holds all of the plan's images serves it too (the seed's nested key: a library's kernel
    // from the program linked for the application that imports it): its images define each
    // symbol once, so the plan's imports are bound there as the plan binds them.
    const bundle::LoadedBundle *own = images_[root].host;
    if (cache::LinkedProgram *program = programs_.find(dev, keyOf(plan))) {
      cache::LinkedProgram::Use use{root, plan, {}};
      if (!llvm::is_contained(program->uses, use)) {
        // The plan's host objects stay loaded while it uses the program.
        if (auto hosts = hostsOf(plan.images, own); !hosts.empty()) {
          lock.release();
          auto pins = pin(hosts);
          lock.acquire();
          if (!pins) {
            if (llvm::Error err = rescan(label)) return err;
            continue;
          }
          if (!programs_.contains(program) || !images_.contains(root) || !images_[root].loaded) {
            for (auto &pinned : *pins) released_.push_back(std::move(pinned));
            continue;
          }
          use.pins = std::move(*pins);
        }
        program->uses.push_back(std::move(use));
      }
      if (!built && Debug::get().on(Debug::Statistics))  // just built here: said so already
        Debug::get().print("program for " + label + ": in memory (" + std::to_string(plan.images.size()) + " of its " +
                           std::to_string(program->key.size()) + " images)");
      images_[root].program = program;
      return program;
    }
    // Linked with the loaded images that import from it, so that their kernels find this
    // program later rather than build the plan's code again (the seed's double compilation when
    // a library's kernel comes first). Should that link fail, the plan is linked alone.
    BuildJob job;
    job.uses.push_back({root, plan, {}});
    std::vector<uint32_t> withImporters{root};
    for (uint32_t importer : importersOf(plan, dev, job.uses)) withImporters.push_back(importer);
    std::optional<LinkPlan> joint;
    const LinkPlan &linked = withImporters.size() == 1 ? plan : joint.emplace(planFor(withImporters));
    const auto buildKey = std::make_pair(static_cast<const backend::Device *>(dev), keyOf(linked));
    // A thread already builds it: wait, and take the program it made (or build it too where this
    // thread may hold the host loader's lock, which that one may be waiting for).
    std::shared_ptr<Building> building;
    if (auto it = building_.find(buildKey); it != building_.end()) {
      std::shared_ptr<Building> other = it->second;
      if (waitForOther(lock.held(), built_, hostLockWait_, [&] { return other->done; })) continue;
    } else {
      building = std::make_shared<Building>();
      building_.emplace(buildKey, building);
    }
    auto plannedInputs = [&](const LinkPlan &what, BuildJob::Plan &into) {
      into.key = keyOf(what);
      into.images = what.images;
      for (size_t i = 0; i < what.images.size(); ++i) {
        LoadedImage &image = images_[what.images[i]];
        const backend::SpecConstants &specs = job.specConstants.emplace_back(image.specConstants);
        into.inputs.push_back({&image.image, image.label, &specs, what.hidden[i]});
      }
    };
    plannedInputs(linked, job.linked);
    if (withImporters.size() > 1) plannedInputs(plan, job.alone);
    if (Debug::get().on(Debug::Bindings)) {
      for (const Binding &b : linked.bindings)
        Debug::get().print("binding `" + std::string(b.symbol) + "`: " + images_[b.importer].label + " -> " +
                           images_[b.definer].label);
      for (size_t i = 0; i < linked.images.size(); ++i)
        for (std::string_view name : linked.hidden[i])
          Debug::get().print("interposed `" + std::string(name) + "`: made local in " +
                             images_[linked.images[i]].label);
    }
    // The images stay whatever happens meanwhile; their host objects stay loaded while the build
    // reads them (the root's own too).
    for (uint32_t id : linked.images) images_.hold(id);
    const auto hosts = hostsOf(linked.images, nullptr);
    std::vector<std::vector<HostObject>> useHosts;
    for (const cache::LinkedProgram::Use &use : job.uses) useHosts.push_back(hostsOf(use.plan.images, images_[use.root].host));

    lock.release();
    const auto start = std::chrono::steady_clock::now();
    std::optional<std::vector<std::shared_ptr<const void>>> pins = pin(hosts);
    llvm::Expected<cache::Built> made = cache::Built{};
    size_t bindings = linked.bindings.size();
    if (pins) {
      made = programs_.build(*dev, job.linked.key, job.linked.inputs);
      if (!made && !job.alone.inputs.empty()) {
        if (Debug::get().on(Debug::Statistics))
          Debug::get().print("program for " + label + ": with its importers it did not link (" +
                             llvm::toString(made.takeError()) + "); linked alone");
        else
          llvm::consumeError(made.takeError());
        job.uses.resize(1);
        job.linked = std::move(job.alone);
        bindings = plan.bindings.size();
        made = programs_.build(*dev, job.linked.key, job.linked.inputs);
      }
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    lock.acquire();

    if (building) {
      building->done = true;
      building_.erase(buildKey);
      built_.notify_all();
    }
    // Each use keeps the references on its plan's host objects.
    auto finish = [&] {
      if (pins)
        for (auto &pinned : *pins) released_.push_back(std::move(pinned));
      for (uint32_t id : linked.images) images_.release(id);
    };
    if (!pins) {
      finish();
      if (llvm::Error err = rescan(label)) return err;
      continue;
    }
    if (!made) {
      finish();
      return made.takeError();
    }
    built = true;
    if (Debug::get().on(Debug::Statistics))
      Debug::get().print("program for " + label + ": " + std::to_string(job.linked.images.size()) + " images, " +
                         std::to_string(bindings) + " bindings, " +
                         (made->fromStore() ? "loaded from " + made->source + " in " : std::string("linked in ")) +
                         llvm::formatv("{0:f2}", ms).str() + " ms on " + dev->name() +
                         (made->fromStore() ? "" : " (" + std::string(dev->linkMethod()) + ")"));
    // Uses whose root was unloaded meanwhile are not kept; another thread's program for the same
    // key (it built too, or waited less) serves instead of this one.
    std::vector<cache::LinkedProgram::Use> uses;
    for (size_t u = 0; u < job.uses.size(); ++u) {
      cache::LinkedProgram::Use &use = job.uses[u];
      if (!images_.contains(use.root) || !images_[use.root].loaded) continue;
      for (const HostObject &host : useHosts[u])
        for (size_t h = 0; h < hosts.size(); ++h)
          if (hosts[h] == host) use.pins.push_back((*pins)[h]);
      uses.push_back(std::move(use));
    }
    const bool rootUses = !uses.empty() && uses.front().root == root;
    cache::LinkedProgram *kept = nullptr;
    if (!uses.empty() && !programs_.find(dev, job.linked.key))
      kept = keepProgram(job.linked.key, job.linked.images, std::move(uses), dev, std::move(made->program));
    else
      released_.push_back(std::shared_ptr<backend::Program>(std::move(made->program)));
    finish();
    // The root's program is the one just linked for its plan: bound now rather than planned again.
    if (kept && rootUses) {
      images_[root].program = kept;
      return kept;
    }
  }
}

std::vector<uint32_t> Loader::importersOf(const LinkPlan &plan, backend::Device *dev,
                                          std::vector<cache::LinkedProgram::Use> &uses) {
  std::vector<uint32_t> found;
  std::set<uint32_t> inPlan(plan.images.begin(), plan.images.end()), seen;
  const llvm::DenseSet<uint32_t> pulledIn(plan.images.begin(), plan.images.end());  // sets' images the plan has
  // A worklist over the exports of what the program holds: the cost follows the imports of
  // those names, never the number of loaded images.
  std::vector<uint32_t> work(plan.images.begin(), plan.images.end());
  while (!work.empty()) {
    const uint32_t id = work.back();
    work.pop_back();
    for (const Symbol &s : images_[id].image.symbols) {
      if (s.kind == SymbolKind::Import) continue;
      for (uint32_t importer : images_.importersOf(s.name)) {
        if (inPlan.count(importer) || !seen.insert(importer).second) continue;
        // Of this device's family, and an image the device takes.
        if (!deviceTakes(importer) || devices_.forImage(images_[importer].image) != dev) continue;
        if (resolve(s.name, importer, pulledIn) != id) continue;  // its import binds elsewhere
        const uint32_t roots[] = {importer};
        LinkPlan own = planFor(roots);
        if (!own.unresolved.empty() || !own.conflicts.empty() || !own.setProblems.empty())
          continue;  // LAZY: its own business
        found.push_back(importer);
        for (uint32_t member : own.images)
          if (inPlan.insert(member).second) work.push_back(member);
        uses.push_back({importer, std::move(own), {}});
      }
    }
  }
  return found;
}

}  // namespace devdl
