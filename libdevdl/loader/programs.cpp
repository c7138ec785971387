// A kernel's program, found: planned over the scopes, found in memory and used (its plan's host
// objects referenced while it uses the program), else built (program_build.cpp). Programs kept
// and dropped.
#include "loader/programs.h"

#include "loader/build_job.h"
#include "support/debug.h"

#include <llvm/ADT/STLExtras.h>

namespace devdl {

llvm::Error Programs::Request::rescan() {
  constexpr int kMostUnloaded = 3;
  scanned = false;
  if (++hostsUnloaded < kMostUnloaded) return llvm::Error::success();
  return fail(ErrorCode::NotFound, label + ": a host object it needs was unloaded meanwhile");
}

llvm::Expected<cache::LinkedProgram *> Programs::programFor(LoaderLock &lock, uint32_t root, unsigned place,
                                                            bool alone) {
  Request request{root, 0, {}};
  request.alone = alone;
  for (;;) {
    if (!images_.contains(root) || !images_[root].loaded) return fail(ErrorCode::NotFound, "the image was unloaded meanwhile");
    request.place = parts_.places.placeFor(images_[root].image, place);
    // Like the host loader's bindings, a program stays as it was linked while its root is
    // loaded; a new link sees the process as it is now.
    if (cache::LinkedProgram *program = images_[root].programAt(request.place)) return program;
    if (!request.scanned) {
      request.scanned = true;
      parts_.scanProcess(lock);
      continue;
    }
    request.label = images_[root].label;
    auto planned = plan(request);
    if (!planned) return planned.takeError();
    // The same code linked for the same device is the same program, whichever handles or files
    // the images came from; a program holding all of the plan's images serves it too (the
    // seed's nested key: a library's kernel from the program linked for its importer).
    cache::LinkedProgram *found = cache_.find(planned->device, planned->key);
    // An image's variable another image interposes keeps the image's own instance, which the
    // image's own code reaches (as -Bsymbolic): where no program holds it yet, the image's own
    // program is linked first, alone, to hold it; then the plan is looked at again.
    if (std::optional<uint32_t> owner = found ? std::nullopt : interposedWithoutInstance(request, *planned)) {
      if (llvm::Error err = linkOwnProgram(lock, request, *owner, place)) return err;
      continue;
    }
    auto program = found ? use(lock, request, *planned, found) : Build(*this, request, *planned).run(lock);
    if (!program) return program.takeError();
    if (program->settled()) {
      images_[root].setProgram(request.place, **program);
      return **program;
    }
  }
}

std::optional<uint32_t> Programs::interposedWithoutInstance(const Request &request, const Planned &planned) const {
  return instances_.unheldInterposed(planned.plan, planned.device, [&](uint32_t id) {
    return id == request.root || llvm::is_contained(request.ownsTried, id) || llvm::is_contained(owning_, id);
  });
}

llvm::Error Programs::linkOwnProgram(LoaderLock &lock, Request &request, uint32_t owner, unsigned place) {
  request.ownsTried.push_back(owner);
  owning_.push_back(owner);
  auto own = programFor(lock, owner, place, /*alone=*/true);
  owning_.erase(llvm::find(owning_, owner));
  return own ? llvm::Error::success() : inImage(own.takeError(), request.label);
}

llvm::Expected<cache::LinkedProgram *> Programs::programForRuntime(LoaderLock &lock, std::span<const uint32_t> roots,
                                                                   std::string label,
                                                                   const backend::RuntimeLoad &runtime) {
  Request request{roots.front(), 0, std::move(label)};
  request.roots.assign(roots.begin(), roots.end());
  request.alone = true;
  request.runtime = &runtime;
  request.scanned = true;  // by the caller, which found the roots so
  for (;;) {
    for (uint32_t root : roots)
      if (!images_.contains(root) || !images_[root].loaded) return fail(ErrorCode::NotFound, "the image was unloaded meanwhile");
    request.place = parts_.places.placeFor(images_[request.root].image, 0);
    if (!request.scanned) {
      request.scanned = true;
      parts_.scanProcess(lock);
      continue;
    }
    auto planned = plan(request);
    if (!planned) return planned.takeError();
    // The runtime finds the objects' variables by name in what it loads: their instances must be
    // this program's, not one linked before (for a library whose constructors ran first).
    for (uint32_t root : roots)
      for (std::string_view name : instances_.variablesOf(root))
        if (const cache::LinkedProgram *holder = cache_.defining(root, name, planned->device))
          return fail(ErrorCode::Unsupported,
                      request.label + ": the instance of `" + std::string(instances_.variableShown(root, name)) +
                          "` is in the program of " + std::string(instances_.labelOf(*holder)) +
                          ", linked before this object's constructors ran, which the CUDA runtime does not reach "
                          "by the variable's name");
    // As programFor: an image's variable another image interposes gets its own program first.
    if (std::optional<uint32_t> owner = interposedWithoutInstance(request, *planned)) {
      if (llvm::Error err = linkOwnProgram(lock, request, *owner, 0)) return err;
      continue;
    }
    auto program = Build(*this, request, *planned).run(lock);
    if (!program) return program.takeError();
    if (program->settled()) {
      for (uint32_t root : roots) images_[root].setProgram(request.place, **program);
      return **program;
    }
  }
}

void Programs::release(cache::LinkedProgram *program) {
  std::unique_ptr<cache::LinkedProgram> released = cache_.release(program, parts_.mutex.released());
  if (!released) return;
  dropLinksTo(*released);
  releaseUnneeded();
}

void Programs::dropLinksTo(const cache::LinkedProgram &gone) {
  for (uint32_t id = 0; id < images_.end(); ++id)
    if (images_.contains(id))
      for (cache::LinkedProgram *&program : images_[id].programs)
        if (program == &gone) program = nullptr;
  for (uint32_t id : gone.images) images_.unhold(id);
}

llvm::Expected<Programs::Planned> Programs::plan(const Request &request) {
  const Planner planner = this->planner(request.place);
  LinkPlan plan = planner.plan(request.rootsLinked());
  if (llvm::Error err = planner.unresolvedError(plan)) return err;
  if (llvm::Error err = planner.conflictError(plan)) return err;
  // Opened when the image came, or the view's.
  auto device = parts_.places.deviceAt(images_[request.root].image, request.place);
  if (!device) return inImage(device.takeError(), request.label);
  cache::ProgramKey key = instances_.keyOf(plan);
  key.forRuntime = request.runtime != nullptr;
  return Planned{std::move(plan), *device, std::move(key)};
}

llvm::Expected<Outcome<cache::LinkedProgram *>> Programs::use(LoaderLock &lock, Request &request, Planned &planned,
                                                              cache::LinkedProgram *program) {
  cache::LinkedProgram::Use use{request.root, planned.plan, {}};
  if (!llvm::is_contained(program->uses, use)) {
    // The plan's host objects stay loaded while it uses the program.
    if (auto hosts = images_.hostsOf(planned.plan.images, images_[request.root].host); !hosts.empty()) {
      lock.letGo();
      auto references = host::referenceAll(hosts);
      lock.takeAgain();
      if (!references) {
        if (llvm::Error err = request.rescan()) return err;
        return Outcome<cache::LinkedProgram *>::lookAgain();
      }
      if (!cache_.contains(program) || !images_.contains(request.root) || !images_[request.root].loaded) {
        parts_.mutex.destroyLater(references);
        return Outcome<cache::LinkedProgram *>::lookAgain();
      }
      use.pins = std::move(*references);
    }
    program->uses.push_back(std::move(use));
  }
  if (!request.built && Debug::get().on(Debug::Statistics))  // just built here: said so already
    Debug::get().print("program for " + request.label + ": in memory (" + std::to_string(planned.plan.images.size()) +
                       " of its " + std::to_string(program->key.hashes.size()) + " images)");
  return Outcome(program);
}

void Programs::dropPlans(std::span<const uint32_t> roots) {
  auto loaded = [&](uint32_t id) { return images_.contains(id) && images_[id].loaded; };
  for (std::unique_ptr<cache::LinkedProgram> &unused : cache_.dropUses(roots, loaded, parts_.mutex.released()))
    dropLinksTo(*unused);
}

const LinkPlan *Programs::linkedPlan(uint32_t root, unsigned place) const {
  const LoadedImage &image = images_[root];
  if (const cache::LinkedProgram *program = image.programAt(parts_.places.placeFor(image.image, place)))
    for (const cache::LinkedProgram::Use &use : program->uses)
      if (use.root == root) return &use.plan;
  return nullptr;
}

const LinkPlan &Programs::planOf(uint32_t root, unsigned place, std::optional<LinkPlan> &made) const {
  if (const LinkPlan *linked = linkedPlan(root, place)) return *linked;
  const uint32_t roots[] = {root};
  return made.emplace(planner(parts_.places.placeFor(images_[root].image, place)).plan(roots));
}

}  // namespace devdl
