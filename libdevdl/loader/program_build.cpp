// A plan's program built once, in phases: prepared (its inputs copied, what it reads held),
// refused where it cannot be built, built with the mutex let go (one thread's turn), its failure
// said and remembered, or kept for the uses it serves. It is linked with the loaded images that
// import from the plan, so that their kernels find this program later rather than build the
// plan's code again (the seed's double compilation when a library's kernel comes first).
#include "loader/build_job.h"
#include "support/debug.h"

#include <llvm/ADT/STLExtras.h>
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

Programs::Build::Build(Programs &programs, Request &request, Planned &planned)
    : programs_(programs), images_(programs.images_), request_(request), planned_(planned) {
  job_.device = planned_.device;
  job_.runtime = request_.runtime;
  job_.generation = Generation::now();
  std::optional<LinkPlan> joint = withImporters();
  if (joint) {
    inputsOf(*joint, programs_.instances_.keyOf(*joint), job_.linked);
    inputsOf(planned_.plan, planned_.key, job_.alone);
  } else {
    inputsOf(planned_.plan, planned_.key, job_.linked);
  }
  const LinkPlan &linked = joint ? *joint : planned_.plan;
  sayBindings(linked);
  // The programs holding the instances it reaches stay while it builds.
  for (const BuildInputs *inputs : {&job_.linked, &job_.alone})
    for (const BuildInputs::Reached &reached : inputs->reached) {
      job_.lenders.push_back(reached.lender);
      ++reached.lender->borrowers;
    }
  // The images stay whatever happens meanwhile; their host objects stay loaded while the build
  // reads them (the root's own too).
  job_.held = linked.images;
  for (uint32_t id : job_.held) images_.hold(id);
  job_.hosts = images_.hostsOf(linked.images, nullptr);
  for (const cache::LinkedProgram::Use &use : job_.uses)
    job_.useHosts.push_back(images_.hostsOf(use.plan.images, images_[use.root].host));
}

Programs::Build::~Build() {
  programs_.parts_.mutex.destroyLater(job_.references);  // the uses kept hold their own
  for (uint32_t id : job_.held) images_.unhold(id);
  for (cache::LinkedProgram *lender : job_.lenders) --lender->borrowers;
  programs_.releaseUnneeded();
}

llvm::Expected<Outcome<cache::LinkedProgram *>> Programs::Build::run(LoaderLock &lock) {
  if (std::optional<llvm::Error> refused = refuse()) return std::move(*refused);
  // A thread already builds it: wait, and look again (or build it too where this thread may
  // hold the host loader's lock, which that one may be waiting for).
  cache::ProgramCache &programCache = programs_.cache_;
  backend::Devices &devices = programs_.parts_.devices;
  std::optional<cache::ProgramCache::Turn> turn = programCache.takeTurn(lock.held(), planned_.device, job_.linked.key);
  if (!turn) return Outcome<cache::LinkedProgram *>::lookAgain();
  auto sameModelOf = [&](const cache::ProgramKey &key) {
    cache::SameModel same = programCache.sameModel(*planned_.device, key);
    if (same.binary) same.source = "the binary linked for " + devices.label(same.device);
    return same;
  };
  job_.sameModel = sameModelOf(job_.linked.key);
  job_.aloneModel = sameModelOf(job_.alone.key);
  job_.keepBinary = devices.modelShared(*planned_.device);
  lock.letGo();
  Made made = buildUnlocked();
  lock.takeAgain();
  turn.reset();  // the others waiting look again
  if (!job_.references) {
    llvm::consumeError(made.built.takeError());
    if (llvm::Error err = request_.rescan()) return err;
    return Outcome<cache::LinkedProgram *>::lookAgain();
  }
  if (made.jointFailed) {
    llvm::Error joint = fail(ErrorCode::Unsupported, "with its importers it did not link");
    programs_.failedBuilds_.remember(planned_.device, *made.jointFailed, job_.generation, joint);
    llvm::consumeError(std::move(joint));
  }
  if (!made.built) return explainFailure(made.built.takeError());
  request_.built = true;
  if (Debug::get().on(Debug::Statistics))
    Debug::get().print("program for " + request_.label + ": " + std::to_string(job_.linked.images.size()) +
                       " images, " + std::to_string(job_.linked.bindings) + " bindings, " +
                       (made.built->fromStore() ? "loaded from " + made.built->source + " in " : std::string("linked in ")) +
                       llvm::formatv("{0:f2}", made.ms).str() + " ms on " + devices.label(planned_.device) +
                       (made.built->fromStore() ? "" : " (" + std::string(planned_.device->linkMethod()) + ")"));
  cache::LinkedProgram *kept = keepBuilt(made);
  // The root's program is the one just linked for its plan: bound now rather than planned again.
  if (kept && !kept->uses.empty() && kept->uses.front().root == request_.root) return Outcome(kept);
  return Outcome<cache::LinkedProgram *>::lookAgain();
}

std::optional<LinkPlan> Programs::Build::withImporters() {
  // Should the link with its importers fail, the plan is linked alone. Not with them for the
  // program that is to hold an image's interposed variables: its importers' scope interposes them.
  const Planner planner = programs_.planner(request_.place);
  std::vector<uint32_t> roots(request_.rootsLinked().begin(), request_.rootsLinked().end());
  for (uint32_t root : roots) job_.uses.push_back({root, planned_.plan, {}});
  const size_t own = roots.size();
  for (Planner::Importer &importer : planner.importersOf(planned_.plan, [&](uint32_t id) {
         if (request_.alone) return false;
         auto device = programs_.parts_.places.deviceAt(images_[id].image, request_.place);
         if (device) return *device == planned_.device;
         llvm::consumeError(device.takeError());
         return false;
       })) {
    roots.push_back(importer.root);
    job_.uses.push_back({importer.root, std::move(importer.plan), {}});
  }
  if (roots.size() == own) return std::nullopt;
  LinkPlan joint = planner.plan(roots);
  // Their program is linked already, and it does not serve the plan (it makes some of the plan's
  // names local, interposed by an importer's scope): the plan is linked alone, else linking with
  // them would make that program again, and again.
  if (programs_.cache_.find(planned_.device, programs_.instances_.keyOf(joint))) {
    job_.uses.resize(own);
    return std::nullopt;
  }
  return joint;
}

void Programs::Build::inputsOf(const LinkPlan &plan, const cache::ProgramKey &key, BuildInputs &into) {
  into.key = key;
  into.images = plan.images;
  into.interposed = plan.interposed;
  into.bindings = plan.bindings.size();
  programs_.instances_.reach(plan, job_.device, into);
  for (size_t i = 0; i < plan.images.size(); ++i) {
    const LoadedImage &image = images_[plan.images[i]];
    const backend::SpecConstants &specs = job_.specConstants.emplace_back(image.specConstants);
    // The job's copies: the plan may go.
    into.inputs.push_back(
        {&image.image, image.label, &specs, into.interposed[i], into.elsewhere[i], into.interposedElsewhere[i], image.statics});
  }
}

void Programs::Build::sayBindings(const LinkPlan &linked) const {
  if (!Debug::get().on(Debug::Bindings)) return;
  for (const Binding &b : linked.bindings)
    Debug::get().print("binding `" + std::string(b.symbol) + "`: " + images_[b.importer].label + " -> " +
                       images_[b.definer].label);
  for (size_t i = 0; i < linked.images.size(); ++i)
    for (std::string_view name : linked.interposed[i])
      Debug::get().print("interposed `" + std::string(name) + "`: made local in " + images_[linked.images[i]].label);
  for (const BuildInputs::Reached &reached : job_.linked.reached)
    Debug::get().print("instance of `" + std::string(reached.shown) + "` of " + reached.imageLabel +
                       ": reached in the program of " + reached.lenderLabel);
}

std::optional<llvm::Error> Programs::Build::refuse() {
  FailedBuilds &failedBuilds = programs_.failedBuilds_;
  if (!job_.linked.secondCopy.empty())
    return inImage(fail(ErrorCode::Unsupported, job_.linked.secondCopy), request_.label);
  // A build that failed since the loader last changed fails again, without building: with its
  // importers, the plan is linked alone; alone, its error is given again.
  if (!job_.alone.inputs.empty() && failedBuilds.find(planned_.device, job_.linked.key)) {
    job_.uses.resize(1);
    job_.linked = std::move(job_.alone);
    job_.alone = {};
  }
  if (const FailedBuilds::FailedBuild *failed = failedBuilds.find(planned_.device, job_.linked.key))
    return failed->error.make();
  return std::nullopt;
}

Programs::Made Programs::Build::buildUnlocked() {
  Made made;
  const auto start = std::chrono::steady_clock::now();
  job_.references = host::referenceAll(job_.hosts);
  if (!job_.references) return made;
  made.built = buildInputs(job_.linked, job_.sameModel);
  if (!made.built && !job_.alone.inputs.empty()) {
    if (Debug::get().on(Debug::Statistics))
      Debug::get().print("program for " + request_.label + ": with its importers it did not link (" +
                         llvm::toString(made.built.takeError()) + "); linked alone");
    else
      llvm::consumeError(made.built.takeError());
    made.jointFailed = job_.linked.key;
    job_.uses.resize(1);
    job_.linked = std::move(job_.alone);
    made.built = buildInputs(job_.linked, job_.aloneModel);
  }
  made.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return made;
}

llvm::Expected<cache::Built> Programs::Build::buildInputs(const BuildInputs &inputs, const cache::SameModel &same) {
  // Where the instances it reaches lie, asked of the programs that hold them.
  std::vector<cache::InstanceAddress> instances;
  for (const BuildInputs::Reached &reached : inputs.reached) {
    auto cannot = [&](const std::string &why) {
      return unreachable(reached.shown, reached.imageLabel, reached.lenderLabel, why, "", request_.label,
                         *planned_.device);
    };
    if (!reached.why.empty()) return cannot(reached.why);
    auto extent = reached.program->variable(reached.name);
    if (!extent) return cannot(llvm::toString(extent.takeError()));
    instances.push_back({reached.name, reached.cell, extent->address});
  }
  auto built = programs_.cache_.build(*planned_.device, inputs.key, inputs.inputs, instances, same, job_.keepBinary,
                                     job_.runtime);
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
                         "an image with PTX or LTO-IR beside its cubins, or ", request_.label, *planned_.device);
    }
  return err;
}

llvm::Error Programs::Build::explainFailure(llvm::Error err) {
  // A weak import left to the driver, which a loaded image this device cannot take defines:
  // likely why the driver's link failed, and said.
  std::string weak;
  const Planner planner = programs_.planner(request_.place);
  for (uint32_t id : job_.linked.images) {
    if (!images_.contains(id)) continue;
    for (const Symbol &s : images_[id].image.symbols) {
      if (s.kind != SymbolKind::Import || !s.weak || !weak.empty()) continue;
      if (std::string why = planner.whyUnresolved(s.name, id); !why.empty())
        weak = "; `" + std::string(s.name) + "`, left to the driver, is undefined there" + why;
    }
  }
  if (!weak.empty()) err = fail(ErrorCode::Unresolved, llvm::toString(std::move(err)) + weak);
  programs_.failedBuilds_.remember(planned_.device, job_.linked.key, job_.generation, err);
  return err;
}

cache::LinkedProgram *Programs::Build::keepBuilt(Made &made) {
  cache::ProgramCache &programCache = programs_.cache_;
  // Uses whose root was unloaded meanwhile are not kept; each keeps the references on its
  // plan's host objects. Another thread's program for the same key (it built too, or waited
  // less) serves instead of this one.
  std::vector<cache::LinkedProgram::Use> uses;
  for (size_t u = 0; u < job_.uses.size(); ++u) {
    cache::LinkedProgram::Use &use = job_.uses[u];
    if (!images_.contains(use.root) || !images_[use.root].loaded) continue;
    for (const host::ObjectLoad &host : job_.useHosts[u])
      for (size_t h = 0; h < job_.hosts.size(); ++h)
        if (job_.hosts[h] == host) use.pins.push_back((*job_.references)[h]);
    uses.push_back(std::move(use));
  }
  // A program made meanwhile holds an instance this one holds too: this one is a second
  // instance, never kept; the plan is looked at again, and reaches that one.
  const bool second = llvm::any_of(job_.linked.instances, [&](const auto &variable) {
    return programCache.defining(variable.first, variable.second, planned_.device) != nullptr;
  });
  // A runtime loaded its program already: kept whatever else serves the plan.
  if (uses.empty() || (!job_.runtime && (second || programCache.find(planned_.device, job_.linked.key)))) {
    programs_.parts_.mutex.destroyLater(std::shared_ptr<backend::Program>(std::move(made.built->program)));
    return nullptr;
  }
  return keep(*made.built, std::move(uses));
}

cache::LinkedProgram *Programs::Build::keep(cache::Built &made, std::vector<cache::LinkedProgram::Use> uses) {
  const BuildInputs &linked = job_.linked;
  for (uint32_t id : linked.images) images_.hold(id);
  cache::LinkedProgram *kept = programs_.cache_.add(linked.key, linked.images, linked.interposed, std::move(uses),
                                                    job_.device, std::move(made.program), std::move(made.binary));
  for (const auto &[image, name] : linked.instances)
    if (!llvm::is_contained(kept->instances, image)) kept->instances.push_back(image);
  kept->copies = linked.copies;
  for (const BuildInputs::Reached &reached : linked.reached)
    if (!llvm::is_contained(kept->lenders, reached.lender)) {
      kept->lenders.push_back(reached.lender);
      ++reached.lender->borrowers;
    }
  return kept;
}

// FailedBuilds.

const FailedBuilds::FailedBuild *FailedBuilds::find(const backend::Device *device, const cache::ProgramKey &key) {
  const uint64_t now = Generation::now();
  std::erase_if(failed_, [&](const FailedBuild &failed) { return failed.generation != now; });
  for (const FailedBuild &failed : failed_)
    if (failed.device == device && failed.key == key) return &failed;
  return nullptr;
}

void FailedBuilds::remember(const backend::Device *device, const cache::ProgramKey &key, uint64_t generation,
                            llvm::Error &err) {
  if (hasCode(err, ErrorCode::Busy)) return;  // what it needs is in use now, not for ever
  FailedBuild failed{device, key, generation, {}};
  err = KeptError::keep(std::move(err), failed.error);
  failed_.push_back(std::move(failed));
}

}  // namespace devdl
