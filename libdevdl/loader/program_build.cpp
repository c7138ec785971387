// A plan's program built once, in phases: prepared (its inputs copied, what it reads held),
// refused where it cannot be built, built with the mutex let go (one thread's turn), its failure
// said and remembered, or kept for the uses it serves. It is linked with the loaded images that
// import from the plan, so that their kernels find this program later rather than build the
// plan's code again (the seed's double compilation when a library's kernel comes first).
#include "loader/build_job.h"
#include "support/debug.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/ScopeExit.h>
#include <llvm/Support/FormatVariadic.h>

namespace devdl {

namespace {

// A variable whose instance a program cannot reach: whose it is, where, and what would do.
llvm::Error unreachable(std::string_view variable, std::string_view image, std::string_view lender,
                        const std::string &why, std::string_view images, const std::string &program,
                        const backend::Device &device) {
  return fail(ErrorCode::Unsupported, "`" + llvm::Twine(variable) + "` of " + image + " has its instance on " +
                                          device.description() + " in the program of " + lender +
                                          ", which the program of " + program + " cannot reach: " + why + " (" +
                                          images +
                                          "opening the application before the library's own kernels run, which "
                                          "links them into one program, would do)");
}

}  // namespace

llvm::Expected<Outcome<cache::LinkedProgram *>> Programs::build(LoaderLock &lock, Request &request, Planned &planned) {
  BuildJob job = prepare(request, planned);
  auto end = llvm::make_scope_exit([&] { releaseJob(job); });  // however the build ends
  if (std::optional<llvm::Error> refused = refuse(job, request, planned)) return std::move(*refused);
  // A thread already builds it: wait, and look again (or build it too where this thread may
  // hold the host loader's lock, which that one may be waiting for).
  std::optional<cache::ProgramCache::Turn> turn = cache_.takeTurn(lock.held(), planned.device, job.linked.key);
  if (!turn) return Outcome<cache::LinkedProgram *>::lookAgain();
  auto sameModelOf = [&](const cache::ProgramKey &key) {
    cache::SameModel same = cache_.sameModel(*planned.device, key);
    if (same.binary) same.source = "the binary linked for " + parts_.devices.label(same.device);
    return same;
  };
  job.sameModel = sameModelOf(job.linked.key);
  job.aloneModel = sameModelOf(job.alone.key);
  job.keepBinary = parts_.devices.modelShared(*planned.device);
  lock.letGo();
  Made made = buildUnlocked(job, request, planned);
  lock.takeAgain();
  turn.reset();  // the others waiting look again
  if (!job.references) {
    llvm::consumeError(made.built.takeError());
    if (llvm::Error err = request.rescan()) return err;
    return Outcome<cache::LinkedProgram *>::lookAgain();
  }
  if (made.jointFailed) {
    llvm::Error joint = fail(ErrorCode::Unsupported, "with its importers it did not link");
    rememberFailure(planned.device, *made.jointFailed, job.generation, joint);
    llvm::consumeError(std::move(joint));
  }
  if (!made.built) return explainFailure(job, request, planned, made.built.takeError());
  request.built = true;
  if (Debug::get().on(Debug::Statistics))
    Debug::get().print("program for " + request.label + ": " + std::to_string(job.linked.images.size()) + " images, " +
                       std::to_string(job.linked.bindings) + " bindings, " +
                       (made.built->fromStore() ? "loaded from " + made.built->source + " in " : std::string("linked in ")) +
                       llvm::formatv("{0:f2}", made.ms).str() + " ms on " + parts_.devices.label(planned.device) +
                       (made.built->fromStore() ? "" : " (" + std::string(planned.device->linkMethod()) + ")"));
  cache::LinkedProgram *kept = keepBuilt(job, planned, made);
  // The root's program is the one just linked for its plan: bound now rather than planned again.
  if (kept && !kept->uses.empty() && kept->uses.front().root == request.root) return Outcome(kept);
  return Outcome<cache::LinkedProgram *>::lookAgain();
}

Programs::BuildJob Programs::prepare(const Request &request, Planned &planned) {
  BuildJob job;
  job.device = planned.device;
  job.runtime = request.runtime;
  job.generation = Generation::now();
  std::optional<LinkPlan> joint = withImporters(request, planned, job);
  if (joint) {
    inputsOf(*joint, keyOf(*joint), job, job.linked);
    inputsOf(planned.plan, planned.key, job, job.alone);
  } else {
    inputsOf(planned.plan, planned.key, job, job.linked);
  }
  const LinkPlan &linked = joint ? *joint : planned.plan;
  sayBindings(linked, job);
  // The programs holding the instances it reaches stay while it builds.
  for (const BuildInputs *inputs : {&job.linked, &job.alone})
    for (const BuildInputs::Reached &reached : inputs->reached) {
      job.lenders.push_back(reached.lender);
      ++reached.lender->borrowers;
    }
  // The images stay whatever happens meanwhile; their host objects stay loaded while the build
  // reads them (the root's own too).
  job.held = linked.images;
  for (uint32_t id : job.held) images_.hold(id);
  job.hosts = images_.hostsOf(linked.images, nullptr);
  for (const cache::LinkedProgram::Use &use : job.uses)
    job.useHosts.push_back(images_.hostsOf(use.plan.images, images_[use.root].host));
  return job;
}

std::optional<LinkPlan> Programs::withImporters(const Request &request, const Planned &planned, BuildJob &job) const {
  // Should the link with its importers fail, the plan is linked alone. Not with them for the
  // program that is to hold an image's interposed variables: its importers' scope interposes them.
  const Planner planner = this->planner(request.place);
  std::vector<uint32_t> roots(request.rootsLinked().begin(), request.rootsLinked().end());
  for (uint32_t root : roots) job.uses.push_back({root, planned.plan, {}});
  const size_t own = roots.size();
  for (Planner::Importer &importer : planner.importersOf(planned.plan, [&](uint32_t id) {
         if (request.alone) return false;
         auto device = parts_.places.deviceAt(images_[id].image, request.place);
         if (device) return *device == planned.device;
         llvm::consumeError(device.takeError());
         return false;
       })) {
    roots.push_back(importer.root);
    job.uses.push_back({importer.root, std::move(importer.plan), {}});
  }
  if (roots.size() == own) return std::nullopt;
  LinkPlan joint = planner.plan(roots);
  // Their program is linked already, and it does not serve the plan (it makes some of the plan's
  // names local, interposed by an importer's scope): the plan is linked alone, else linking with
  // them would make that program again, and again.
  if (cache_.find(planned.device, keyOf(joint))) {
    job.uses.resize(own);
    return std::nullopt;
  }
  return joint;
}

void Programs::inputsOf(const LinkPlan &plan, const cache::ProgramKey &key, BuildJob &job, BuildInputs &into) const {
  into.key = key;
  into.images = plan.images;
  into.interposed = plan.interposed;
  into.bindings = plan.bindings.size();
  reachInstances(plan, job.device, into);
  for (size_t i = 0; i < plan.images.size(); ++i) {
    const LoadedImage &image = images_[plan.images[i]];
    const backend::SpecConstants &specs = job.specConstants.emplace_back(image.specConstants);
    // The job's copies: the plan may go.
    into.inputs.push_back(
        {&image.image, image.label, &specs, into.interposed[i], into.elsewhere[i], into.interposedElsewhere[i], image.statics});
  }
}

void Programs::sayBindings(const LinkPlan &linked, const BuildJob &job) const {
  if (!Debug::get().on(Debug::Bindings)) return;
  for (const Binding &b : linked.bindings)
    Debug::get().print("binding `" + std::string(b.symbol) + "`: " + images_[b.importer].label + " -> " +
                       images_[b.definer].label);
  for (size_t i = 0; i < linked.images.size(); ++i)
    for (std::string_view name : linked.interposed[i])
      Debug::get().print("interposed `" + std::string(name) + "`: made local in " + images_[linked.images[i]].label);
  for (const BuildInputs::Reached &reached : job.linked.reached)
    Debug::get().print("instance of `" + std::string(reached.shown) + "` of " + reached.imageLabel +
                       ": reached in the program of " + reached.lenderLabel);
}

std::optional<llvm::Error> Programs::refuse(BuildJob &job, const Request &request, const Planned &planned) {
  if (!job.linked.secondCopy.empty())
    return inImage(fail(ErrorCode::Unsupported, job.linked.secondCopy), request.label);
  // A build that failed since the loader last changed fails again, without building: with its
  // importers, the plan is linked alone; alone, its error is given again.
  if (!job.alone.inputs.empty() && findFailedBuild(planned.device, job.linked.key)) {
    job.uses.resize(1);
    job.linked = std::move(job.alone);
    job.alone = {};
  }
  if (const FailedBuild *failed = findFailedBuild(planned.device, job.linked.key)) return failed->error.make();
  return std::nullopt;
}

Programs::Made Programs::buildUnlocked(BuildJob &job, const Request &request, const Planned &planned) {
  Made made;
  const auto start = std::chrono::steady_clock::now();
  job.references = host::referenceAll(job.hosts);
  if (!job.references) return made;
  made.built = buildInputs(job, job.linked, job.sameModel, request, planned);
  if (!made.built && !job.alone.inputs.empty()) {
    if (Debug::get().on(Debug::Statistics))
      Debug::get().print("program for " + request.label + ": with its importers it did not link (" +
                         llvm::toString(made.built.takeError()) + "); linked alone");
    else
      llvm::consumeError(made.built.takeError());
    made.jointFailed = job.linked.key;
    job.uses.resize(1);
    job.linked = std::move(job.alone);
    made.built = buildInputs(job, job.linked, job.aloneModel, request, planned);
  }
  made.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return made;
}

llvm::Expected<cache::Built> Programs::buildInputs(const BuildJob &job, const BuildInputs &inputs,
                                                   const cache::SameModel &same, const Request &request,
                                                   const Planned &planned) {
  // Where the instances it reaches lie, asked of the programs that hold them.
  std::vector<cache::InstanceAddress> instances;
  for (const BuildInputs::Reached &reached : inputs.reached) {
    auto cannot = [&](const std::string &why) {
      return unreachable(reached.shown, reached.imageLabel, reached.lenderLabel, why, "", request.label, *planned.device);
    };
    if (!reached.why.empty()) return cannot(reached.why);
    auto extent = reached.program->variable(reached.name);
    if (!extent) return cannot(llvm::toString(extent.takeError()));
    instances.push_back({reached.name, reached.cell, extent->address});
  }
  auto built = cache_.build(*planned.device, inputs.key, inputs.inputs, instances, same, job.keepBinary, job.runtime);
  if (built || inputs.reached.empty()) return built;
  // Where what failed is reaching an instance (an image devdl cannot edit so), say whose.
  std::string why;
  llvm::Error err = llvm::handleErrors(built.takeError(), [&](std::unique_ptr<llvm::ErrorInfoBase> info) {
    why += info->message();
    return llvm::Error(std::move(info));
  });
  for (const BuildInputs::Reached &reached : inputs.reached)
    if (why.find("`" + std::string(reached.name) + "`") != std::string::npos) {
      llvm::consumeError(std::move(err));
      return unreachable(reached.shown, reached.imageLabel, reached.lenderLabel, why,
                         "an image with PTX or LTO-IR beside its cubins, or ", request.label, *planned.device);
    }
  return err;
}

llvm::Error Programs::explainFailure(BuildJob &job, const Request &request, const Planned &planned, llvm::Error err) {
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
  return err;
}

cache::LinkedProgram *Programs::keepBuilt(BuildJob &job, const Planned &planned, Made &made) {
  // Uses whose root was unloaded meanwhile are not kept; each keeps the references on its
  // plan's host objects. Another thread's program for the same key (it built too, or waited
  // less) serves instead of this one.
  std::vector<cache::LinkedProgram::Use> uses;
  for (size_t u = 0; u < job.uses.size(); ++u) {
    cache::LinkedProgram::Use &use = job.uses[u];
    if (!images_.contains(use.root) || !images_[use.root].loaded) continue;
    for (const host::ObjectLoad &host : job.useHosts[u])
      for (size_t h = 0; h < job.hosts.size(); ++h)
        if (job.hosts[h] == host) use.pins.push_back((*job.references)[h]);
    uses.push_back(std::move(use));
  }
  // A program made meanwhile holds an instance this one holds too: this one is a second
  // instance, never kept; the plan is looked at again, and reaches that one.
  const bool second = llvm::any_of(job.linked.instances, [&](const auto &variable) {
    return cache_.defining(variable.first, variable.second, planned.device) != nullptr;
  });
  // A runtime loaded its program already: kept whatever else serves the plan.
  if (uses.empty() || (!job.runtime && (second || cache_.find(planned.device, job.linked.key)))) {
    parts_.mutex.destroyLater(std::shared_ptr<backend::Program>(std::move(made.built->program)));
    return nullptr;
  }
  return keep(job, *made.built, std::move(uses));
}

void Programs::releaseJob(BuildJob &job) {
  parts_.mutex.destroyLater(job.references);  // the uses kept hold their own
  for (uint32_t id : job.held) images_.unhold(id);
  for (cache::LinkedProgram *lender : job.lenders) --lender->borrowers;
  releaseUnneeded();
}

const Programs::FailedBuild *Programs::findFailedBuild(const backend::Device *device, const cache::ProgramKey &key) {
  const uint64_t now = Generation::now();
  std::erase_if(failedBuilds_, [&](const FailedBuild &failed) { return failed.generation != now; });
  for (const FailedBuild &failed : failedBuilds_)
    if (failed.device == device && failed.key == key) return &failed;
  return nullptr;
}

void Programs::rememberFailure(const backend::Device *device, const cache::ProgramKey &key, uint64_t generation,
                               llvm::Error &err) {
  if (hasCode(err, ErrorCode::Busy)) return;  // what it needs is in use now, not for ever
  FailedBuild failed{device, key, generation, {}};
  err = KeptError::keep(std::move(err), failed.error);
  failedBuilds_.push_back(std::move(failed));
}

}  // namespace devdl
