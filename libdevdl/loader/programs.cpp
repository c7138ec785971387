// Candidacy, and a kernel's program: its image's imports resolved into a link plan (the planner),
// the plan's program from the program cache (in memory, else built once: the binary store's,
// else linked), linked with the loaded images that import from it so that a library's code is
// built once. Builds run with the loader's lock let go.
#include "image/aspects.h"
#include "loader/build_job.h"
#include "support/debug.h"
#include "support/error.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/Support/FormatVariadic.h>

#include <algorithm>
#include <deque>

namespace devdl {

std::pair<Candidacy, std::string> Loader::candidacyOf(const DeviceImage &image) {
  return candidacyOn(devices_.forImage(image), image);
}

std::pair<Candidacy, std::string> Loader::candidacyOn(llvm::Expected<backend::Device *> device,
                                                      const DeviceImage &image) {
  // Like the seed's urDeviceSelectBinary check: an image the device cannot take (a cubin on
  // OpenCL, a cubin for another GPU generation) never satisfies an import, whatever its names.
  if (!device) return {Candidacy::Refused, llvm::toString(device.takeError())};
  if (llvm::Error refused = (*device)->accepts(image)) return {Candidacy::Refused, llvm::toString(std::move(refused))};
  // Optional kernel features: an image needing an aspect the device lacks is no candidate.
  auto aspects = requiredAspects(image);
  if (!aspects) return {Candidacy::Refused, llvm::toString(aspects.takeError())};
  for (uint32_t aspect : *aspects)
    if (!(*device)->hasAspect(aspect))
      return {Candidacy::Refused, "it needs " + aspectWords(aspect) + ", which " + (*device)->description() + " lacks"};
  return {Candidacy::Taken, ""};
}

Loader::NewImage Loader::withCandidacy(DeviceImage image, bool mayOpenDevice) {
  if (!mayOpenDevice && !devices_.opensNothingFor(image)) return {std::move(image), Candidacy::Undecided, ""};
  auto [candidacy, why] = candidacyOf(image);
  return {std::move(image), candidacy, std::move(why)};
}

void Loader::decideCandidacies(Lock &lock) {
  // One arriving meanwhile is no candidate until decided.
  llvm::erase_if(undecided_, [&](uint32_t id) {
    return !images_.contains(id) || !images_[id].loaded || images_[id].candidacy != Candidacy::Undecided;
  });
  if (undecided_.empty()) return;
  const std::vector<uint32_t> ids = std::move(undecided_);
  undecided_.clear();
  decideWithLockLetGo(
      lock, ids, [&](const DeviceImage &image) { return candidacyOf(image); },
      [](LoadedImage &image, Acceptance decided) {
        if (image.candidacy != Candidacy::Undecided) return;
        image.candidacy = decided.candidacy;
        image.whyNot = std::move(decided.whyNot);
      });
}

void Loader::decideWithLockLetGo(Lock &lock, const std::vector<uint32_t> &ids,
                                 llvm::function_ref<std::pair<Candidacy, std::string>(const DeviceImage &)> ask,
                                 llvm::function_ref<void(LoadedImage &, Acceptance)> keep) {
  for (uint32_t id : ids) images_.hold(id);  // they stay while the lock is let go
  const auto hosts = hostsOf(ids, nullptr);
  std::vector<std::pair<Candidacy, std::string>> decided;
  lock.release();
  auto references = host::referenceAll(hosts);  // the driver reads a native binary's bytes
  for (uint32_t id : ids) decided.push_back(ask(images_[id].image));  // held, never changed once added
  lock.acquire();
  for (size_t i = 0; i < ids.size(); ++i) {
    LoadedImage &image = images_[ids[i]];
    if (image.loaded) keep(image, {decided[i].first, std::move(decided[i].second)});
    images_.release(ids[i]);
  }
  releaseLater(references);
  changed();
}

void Loader::decideCandidacies(Lock &lock, unsigned place) {
  decideCandidacies(lock);
  if (place == 0) return;
  // Those its device's backend does not link are as on their default devices; the others are
  // asked of its device, with the lock let go.
  std::vector<uint32_t> ids;
  for (uint32_t id = 0; id < images_.end(); ++id) {
    if (!images_.contains(id) || !images_[id].loaded || images_[id].candidacyAt(place) != Candidacy::Undecided) continue;
    LoadedImage &image = images_[id];
    if (image.elsewhere.size() < place) image.elsewhere.resize(place);
    if (placeFor(image.image, place) == 0) {
      if (image.candidacy != Candidacy::Undecided) image.elsewhere[place - 1] = {image.candidacy, image.whyNot};
      continue;
    }
    ids.push_back(id);
  }
  if (ids.empty()) return;
  backend::Device *device = places_[place];
  decideWithLockLetGo(
      lock, ids, [&](const DeviceImage &image) { return candidacyOn(device, image); },
      [&](LoadedImage &image, Acceptance decided) {
        if (image.elsewhere.size() >= place && image.elsewhere[place - 1].candidacy == Candidacy::Undecided)
          image.elsewhere[place - 1] = std::move(decided);
      });
}

std::vector<host::ObjectLoad> Loader::hostsOf(std::span<const uint32_t> plan, const host::LoadedBundle *except) const {
  std::vector<host::ObjectLoad> hosts;
  for (uint32_t id : plan) {
    const host::LoadedBundle *host = images_[id].host;
    // The executable is never unloaded.
    if (!host || host == except || host->object.empty()) continue;
    host::ObjectLoad object{host->object, host->base};
    if (!llvm::is_contained(hosts, object)) hosts.push_back(std::move(object));
  }
  return hosts;
}

llvm::Error Loader::ProgramRequest::rescan() {
  constexpr int kMostUnloaded = 3;
  scanned = false;
  if (++hostsUnloaded < kMostUnloaded) return llvm::Error::success();
  return fail(ErrorCode::NotFound, label + ": a host object it needs was unloaded meanwhile");
}

llvm::Expected<cache::LinkedProgram *> Loader::programFor(Lock &lock, uint32_t root, unsigned place, bool alone) {
  ProgramRequest request{root, 0, {}};
  request.alone = alone;
  for (;;) {
    if (!images_.contains(root) || !images_[root].loaded)
      return fail(ErrorCode::NotFound, "the image was unloaded meanwhile");
    request.place = placeFor(images_[root].image, place);
    // Like the host loader's bindings, a program stays as it was linked while its root is
    // loaded; a new link sees the process as it is now.
    if (cache::LinkedProgram *program = images_[root].programAt(request.place)) return program;
    if (!request.scanned) {
      request.scanned = true;
      scanProcess(lock);
      continue;
    }
    request.label = images_[root].label;
    auto planned = planProgram(request);
    if (!planned) return planned.takeError();
    // The same code linked for the same device is the same program, whichever handles or files
    // the images came from; a program holding all of the plan's images serves it too (the
    // seed's nested key: a library's kernel from the program linked for its importer).
    cache::LinkedProgram *found = programs_.find(planned->device, planned->key);
    // An image's variable another image interposes keeps the image's own instance, which the
    // image's own code reaches (as -Bsymbolic): where no program holds it yet, the image's own
    // program is linked first, alone, to hold it; then the plan is looked at again.
    if (std::optional<uint32_t> owner = found ? std::nullopt : interposedWithoutInstance(request, *planned)) {
      request.ownsTried.push_back(*owner);
      owning_.push_back(*owner);
      auto own = programFor(lock, *owner, place, /*alone=*/true);
      owning_.erase(llvm::find(owning_, *owner));
      if (!own) return inImage(own.takeError(), request.label);
      continue;
    }
    auto program = found ? useProgram(lock, request, *planned, found) : buildProgram(lock, request, *planned);
    if (!program) return program.takeError();
    if (*program) {
      images_[root].setProgram(request.place, *program);
      return *program;
    }
  }
}

llvm::Expected<Loader::PlannedProgram> Loader::planProgram(const ProgramRequest &request) {
  const Planner planner = this->planner(request.place);
  const uint32_t roots[] = {request.root};
  LinkPlan plan = planner.plan(roots);
  if (llvm::Error err = planner.unresolvedError(plan)) return err;
  if (llvm::Error err = planner.conflictError(plan)) return err;
  auto device = deviceAt(images_[request.root].image, request.place);  // opened when the image came, or the view
  if (!device) return inImage(device.takeError(), request.label);
  cache::ProgramKey key = keyOf(plan);
  return PlannedProgram{std::move(plan), *device, std::move(key)};
}

llvm::Expected<cache::LinkedProgram *> Loader::useProgram(Lock &lock, ProgramRequest &request,
                                                          PlannedProgram &planned, cache::LinkedProgram *program) {
  cache::LinkedProgram::Use use{request.root, planned.plan, {}};
  if (!llvm::is_contained(program->uses, use)) {
    // The plan's host objects stay loaded while it uses the program.
    if (auto hosts = hostsOf(planned.plan.images, images_[request.root].host); !hosts.empty()) {
      lock.release();
      auto references = host::referenceAll(hosts);
      lock.acquire();
      if (!references) {
        if (llvm::Error err = request.rescan()) return err;
        return nullptr;
      }
      if (!programs_.contains(program) || !images_.contains(request.root) || !images_[request.root].loaded) {
        releaseLater(references);
        return nullptr;
      }
      use.pins = std::move(*references);
    }
    program->uses.push_back(std::move(use));
  }
  if (!request.built && Debug::get().on(Debug::Statistics))  // just built here: said so already
    Debug::get().print("program for " + request.label + ": in memory (" + std::to_string(planned.plan.images.size()) +
                       " of its " + std::to_string(program->key.hashes.size()) + " images)");
  return program;
}

const Loader::FailedBuild *Loader::failedBuild(const backend::Device *device, const cache::ProgramKey &key) {
  const uint64_t now = generation_.load(std::memory_order_acquire);
  std::erase_if(failedBuilds_, [&](const FailedBuild &failed) { return failed.generation != now; });
  for (const FailedBuild &failed : failedBuilds_)
    if (failed.device == device && failed.key == key) return &failed;
  return nullptr;
}

void Loader::rememberFailure(const backend::Device *device, const cache::ProgramKey &key, uint64_t generation,
                             llvm::Error &err) {
  if (hasCode(err, ErrorCode::Busy)) return;  // what it needs is in use now, not for ever
  FailedBuild failed{device, key, generation, {}};
  err = KeptError::keep(std::move(err), failed.error);
  failedBuilds_.push_back(std::move(failed));
}

Loader::BuildJob Loader::prepareBuild(const ProgramRequest &request, PlannedProgram &planned) {
  // Linked with the loaded images that import from it, so that their kernels find this program
  // later rather than build the plan's code again (the seed's double compilation when a
  // library's kernel comes first). Should that link fail, the plan is linked alone. Not for the
  // program that is to hold an image's interposed variables: its importers' scope interposes them.
  const Planner planner = this->planner(request.place);
  BuildJob job;
  job.generation = generation_.load(std::memory_order_acquire);
  job.uses.push_back({request.root, planned.plan, {}});
  std::vector<uint32_t> withImporters{request.root};
  for (Planner::Importer &importer : planner.importersOf(planned.plan, [&](uint32_t id) {
         if (request.alone) return false;
         auto device = deviceAt(images_[id].image, request.place);
         if (device) return *device == planned.device;
         llvm::consumeError(device.takeError());
         return false;
       })) {
    withImporters.push_back(importer.root);
    job.uses.push_back({importer.root, std::move(importer.plan), {}});
  }
  std::optional<LinkPlan> joint;
  cache::ProgramKey jointKey;
  if (withImporters.size() > 1) {
    joint.emplace(planner.plan(withImporters));
    jointKey = keyOf(*joint);
    // Their program is linked already, and it does not serve the plan (it makes some of the
    // plan's names local, interposed by an importer's scope): the plan is linked alone, else
    // linking with them would make that program again, and again.
    if (programs_.find(planned.device, jointKey)) {
      joint.reset();
      job.uses.resize(1);
    }
  }
  const LinkPlan &linked = joint ? *joint : planned.plan;
  auto inputsOf = [&](const LinkPlan &what, const cache::ProgramKey &key, BuildJob::Inputs &into) {
    into.key = key;
    into.images = what.images;
    into.hidden = what.hidden;
    into.bindings = what.bindings.size();
    reachInstances(what, planned.device, into);
    for (size_t i = 0; i < what.images.size(); ++i) {
      LoadedImage &image = images_[what.images[i]];
      const backend::SpecConstants &specs = job.specConstants.emplace_back(image.specConstants);
      // The job's copies: `joint` goes.
      into.inputs.push_back(
          {&image.image, image.label, &specs, into.hidden[i], into.elsewhere[i], into.hiddenElsewhere[i], image.statics});
    }
  };
  inputsOf(linked, joint ? jointKey : planned.key, job.linked);
  if (joint) inputsOf(planned.plan, planned.key, job.alone);
  if (Debug::get().on(Debug::Bindings)) {
    for (const Binding &b : linked.bindings)
      Debug::get().print("binding `" + std::string(b.symbol) + "`: " + images_[b.importer].label + " -> " +
                         images_[b.definer].label);
    for (size_t i = 0; i < linked.images.size(); ++i)
      for (std::string_view name : linked.hidden[i])
        Debug::get().print("interposed `" + std::string(name) + "`: made local in " + images_[linked.images[i]].label);
    for (const BuildJob::Inputs::Reached &reached : job.linked.reached)
      Debug::get().print("instance of `" + std::string(reached.shown) + "` of " + reached.imageLabel +
                         ": reached in the program of " + reached.lenderLabel);
  }
  // The programs holding the instances it reaches stay while it builds.
  for (const BuildJob::Inputs *inputs : {&job.linked, &job.alone})
    for (const BuildJob::Inputs::Reached &reached : inputs->reached) {
      job.lenders.push_back(reached.lender);
      ++reached.lender->borrowers;
    }
  // The images stay whatever happens meanwhile; their host objects stay loaded while the build
  // reads them (the root's own too).
  job.held = linked.images;
  for (uint32_t id : job.held) images_.hold(id);
  job.hosts = hostsOf(linked.images, nullptr);
  for (const cache::LinkedProgram::Use &use : job.uses)
    job.useHosts.push_back(hostsOf(use.plan.images, images_[use.root].host));
  return job;
}

llvm::Expected<cache::LinkedProgram *> Loader::buildProgram(Lock &lock, ProgramRequest &request,
                                                            PlannedProgram &planned) {
  BuildJob job = prepareBuild(request, planned);
  auto letGo = [&](std::optional<std::vector<std::shared_ptr<const void>>> &references) {
    releaseLater(references);
    for (uint32_t id : job.held) images_.release(id);
    for (cache::LinkedProgram *lender : job.lenders) --lender->borrowers;
    dropPrograms({});
  };
  std::optional<std::vector<std::shared_ptr<const void>>> references;
  if (!job.linked.secondCopy.empty()) {
    letGo(references);
    return inImage(fail(ErrorCode::Unsupported, job.linked.secondCopy), request.label);
  }
  // A build that failed since the loader last changed fails again, without building: with its
  // importers, the plan is linked alone; alone, its error is given again.
  if (!job.alone.inputs.empty() && failedBuild(planned.device, job.linked.key)) {
    job.uses.resize(1);
    job.linked = std::move(job.alone);
    job.alone = {};
  }
  if (const FailedBuild *failed = failedBuild(planned.device, job.linked.key)) {
    llvm::Error again = failed->error.make();
    letGo(references);
    return again;
  }
  // A thread already builds it: wait, and look again (or build it too where this thread may
  // hold the host loader's lock, which that one may be waiting for).
  std::optional<cache::ProgramCache::Turn> turn = programs_.takeTurn(lock.held(), planned.device, job.linked.key);
  if (!turn) {
    letGo(references);
    return nullptr;
  }

  // A device of the same model that linked it already lends its binary; while two are in use,
  // the binary is kept for the other.
  auto sameModelOf = [&](const cache::ProgramKey &key) {
    cache::SameModel same = programs_.sameModel(*planned.device, key);
    if (same.binary) same.source = "the binary linked for " + devices_.label(same.device);
    return same;
  };
  const cache::SameModel sameModel = sameModelOf(job.linked.key), aloneModel = sameModelOf(job.alone.key);
  const bool keepBinary = devices_.modelShared(*planned.device);
  lock.release();
  const auto start = std::chrono::steady_clock::now();
  references = host::referenceAll(job.hosts);
  llvm::Expected<cache::Built> made = cache::Built{};
  // A variable whose instance this program cannot reach: whose it is, where, and what would do.
  auto unreachable = [&](const BuildJob::Inputs::Reached &reached, const std::string &why, std::string_view images) {
    return fail(ErrorCode::Unsupported, "`" + llvm::Twine(reached.shown) + "` of " + reached.imageLabel +
                                            " has its instance on " + planned.device->description() +
                                            " in the program of " + reached.lenderLabel + ", which the program of " +
                                            request.label + " cannot reach: " + why + " (" + images +
                                            "opening the application before the library's own kernels run, which "
                                            "links them into one program, would do)");
  };
  // Where the instances it reaches lie, asked of the programs that hold them.
  auto build = [&](const BuildJob::Inputs &inputs, const cache::SameModel &same) -> llvm::Expected<cache::Built> {
    std::vector<cache::InstanceAddress> instances;
    for (const BuildJob::Inputs::Reached &reached : inputs.reached) {
      if (!reached.why.empty()) return unreachable(reached, reached.why, "");
      auto extent = reached.program->variable(reached.name);
      if (!extent) return unreachable(reached, llvm::toString(extent.takeError()), "");
      instances.push_back({reached.name, reached.cell, extent->address});
    }
    auto built = programs_.build(*planned.device, inputs.key, inputs.inputs, instances, same, keepBinary);
    if (built || inputs.reached.empty()) return built;
    // Where what failed is reaching an instance (an image devdl cannot edit so), say whose.
    std::string why;
    llvm::Error err = llvm::handleErrors(built.takeError(), [&](std::unique_ptr<llvm::ErrorInfoBase> info) {
      why += info->message();
      return llvm::Error(std::move(info));
    });
    for (const BuildJob::Inputs::Reached &reached : inputs.reached)
      if (why.find("`" + std::string(reached.name) + "`") != std::string::npos) {
        llvm::consumeError(std::move(err));
        return unreachable(reached, why, "an image with PTX or LTO-IR beside its cubins, or ");
      }
    return err;
  };
  std::optional<cache::ProgramKey> jointFailed;  // remembered once the lock is held again
  if (references) {
    made = build(job.linked, sameModel);
    if (!made && !job.alone.inputs.empty()) {
      if (Debug::get().on(Debug::Statistics))
        Debug::get().print("program for " + request.label + ": with its importers it did not link (" +
                           llvm::toString(made.takeError()) + "); linked alone");
      else
        llvm::consumeError(made.takeError());
      jointFailed = job.linked.key;
      job.uses.resize(1);
      job.linked = std::move(job.alone);
      made = build(job.linked, aloneModel);
    }
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  lock.acquire();
  turn.reset();  // the others waiting look again

  if (!references) {
    llvm::consumeError(made.takeError());
    letGo(references);
    if (llvm::Error err = request.rescan()) return err;
    return nullptr;
  }
  if (jointFailed) {
    llvm::Error joint = fail(ErrorCode::Unsupported, "with its importers it did not link");
    rememberFailure(planned.device, *jointFailed, job.generation, joint);
    llvm::consumeError(std::move(joint));
  }
  if (!made) {
    llvm::Error err = made.takeError();
    // A weak import left to the driver, which a loaded image this device cannot take defines:
    // likely why the driver's link failed, and said.
    std::string weak;
    const Planner planner = this->planner(request.place);
    for (uint32_t id : job.linked.images) {
      if (!images_.contains(id)) continue;
      for (const Symbol &s : images_[id].image.symbols) {
        if (s.kind != SymbolKind::Import || !s.weak || !weak.empty()) continue;
        if (std::string why = planner.whyUnresolved(s.name, id); !why.empty())
          weak = "; `" + std::string(s.name) + "`, left to the driver, is undefined there" + why;
      }
    }
    if (!weak.empty()) err = fail(ErrorCode::Unresolved, llvm::toString(std::move(err)) + weak);
    rememberFailure(planned.device, job.linked.key, job.generation, err);
    letGo(references);
    return err;
  }
  request.built = true;
  if (Debug::get().on(Debug::Statistics))
    Debug::get().print("program for " + request.label + ": " + std::to_string(job.linked.images.size()) + " images, " +
                       std::to_string(job.linked.bindings) + " bindings, " +
                       (made->fromStore() ? "loaded from " + made->source + " in " : std::string("linked in ")) +
                       llvm::formatv("{0:f2}", ms).str() + " ms on " + devices_.label(planned.device) +
                       (made->fromStore() ? "" : " (" + std::string(planned.device->linkMethod()) + ")"));
  // Uses whose root was unloaded meanwhile are not kept; each keeps the references on its
  // plan's host objects. Another thread's program for the same key (it built too, or waited
  // less) serves instead of this one.
  std::vector<cache::LinkedProgram::Use> uses;
  for (size_t u = 0; u < job.uses.size(); ++u) {
    cache::LinkedProgram::Use &use = job.uses[u];
    if (!images_.contains(use.root) || !images_[use.root].loaded) continue;
    for (const host::ObjectLoad &host : job.useHosts[u])
      for (size_t h = 0; h < job.hosts.size(); ++h)
        if (job.hosts[h] == host) use.pins.push_back((*references)[h]);
    uses.push_back(std::move(use));
  }
  const bool rootUses = !uses.empty() && uses.front().root == request.root;
  // A program made meanwhile holds an instance this one holds too: this one is a second
  // instance, never kept; the plan is looked at again, and reaches that one.
  const bool second = llvm::any_of(job.linked.instances, [&](const auto &variable) {
    return programs_.defining(variable.first, variable.second, planned.device) != nullptr;
  });
  cache::LinkedProgram *kept = nullptr;
  if (!uses.empty() && !second && !programs_.find(planned.device, job.linked.key)) {
    kept = keepProgram(job.linked.key, job.linked.images, job.linked.hidden, std::move(uses), planned.device,
                       std::move(made->program), std::move(made->binary));
    for (const auto &[image, name] : job.linked.instances)
      if (!llvm::is_contained(kept->instances, image)) kept->instances.push_back(image);
    kept->copies = job.linked.copies;
    for (const BuildJob::Inputs::Reached &reached : job.linked.reached)
      if (!llvm::is_contained(kept->lenders, reached.lender)) {
        kept->lenders.push_back(reached.lender);
        ++reached.lender->borrowers;
      }
  } else {
    released_.push_back(std::shared_ptr<backend::Program>(std::move(made->program)));
  }
  letGo(references);
  // The root's program is the one just linked for its plan: bound now rather than planned again.
  return kept && rootUses ? kept : nullptr;
}

}  // namespace devdl
