// A kernel's program: its root image's imports resolved into a link plan (the planner), the plan's
// program from the program cache (in memory, else built once: the binary store's, else linked),
// linked with the loaded images that import from it so that a library's code is built once, and
// one instance of each loaded image's variables on a device. Builds run with the loader's mutex
// let go (docs/architecture.md, "Threads").
#pragma once

#include "backend/registry.h"
#include "cache/program_cache.h"
#include "loader/image_table.h"
#include "loader/loader_lock.h"
#include "loader/places.h"
#include "resolve/link_plan.h"
#include "resolve/planner.h"
#include "resolve/scopes.h"
#include "support/error.h"

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace devdl {

class Programs {
 public:
  /// What it links with and for: the loader's images, scopes and devices, its mutex, and how the
  /// process is scanned before a plan is made (a host object loaded since may define an import).
  struct Parts {
    ImageTable &images;
    const Scopes &scopes;
    Places &places;
    backend::Devices &devices;
    LoaderMutex &mutex;
    std::function<void(LoaderLock &)> scanProcess;
  };
  Programs(Parts parts, store::BinaryStore &(*store)(), std::chrono::milliseconds hostLockWait)
      : parts_(std::move(parts)), images_(parts_.images), cache_(store, hostLockWait) {}

  Planner planner(unsigned place = 0) const { return Planner(images_, parts_.scopes, place); }
  /// The program a root image's kernels are looked up in at `place`: in memory, else built with
  /// the mutex let go (or another thread's build waited for), in phases: plan, find (holding the
  /// plan's host objects while it uses the program), else build. A phase that let the mutex go
  /// may find things changed: the phases start again. The root may have been unloaded when it
  /// returns: callers hold what they need. `alone`: not linked with the loaded images that import
  /// from the plan (the program that is to hold an image's interposed variables).
  llvm::Expected<cache::LinkedProgram *> programFor(LoaderLock &lock, uint32_t root, unsigned place, bool alone = false);
  /// The program of `roots` (a host object's CUDA objects, found by a scan of the process the
  /// caller made) linked together, as nvcc -dlink links them, for the default device, alone, and
  /// loaded by `runtime`: always a new program, as the runtime loads its own module, which becomes
  /// each root's program. Their variables' instances are its own where no program holds them yet.
  llvm::Expected<cache::LinkedProgram *> programForRuntime(LoaderLock &lock, std::span<const uint32_t> roots,
                                                           std::string label, const backend::RuntimeLoad &runtime);
  /// Releases a program programForRuntime made, whose runtime unloaded it, whatever still needs it.
  void release(cache::LinkedProgram *program);
  /// The plan a root image's program at `place` was linked from for it; null where it has none.
  const LinkPlan *linkedPlan(uint32_t root, unsigned place) const;
  /// The plan of a root image at `place`: its program's plan for it where it has a program (what
  /// its kernels run, libraries closed since included), else its plan as the scopes are now,
  /// made in `made`.
  const LinkPlan &planOf(uint32_t root, unsigned place, std::optional<LinkPlan> &made) const;
  /// Drops the plans rooted at `roots` and releases the programs no longer needed
  /// (cache::LinkedProgram::needed), with the images only they held.
  void dropPlans(std::span<const uint32_t> roots);
  /// Releases the programs no longer needed (dropPlans of none).
  void releaseUnneeded() { dropPlans({}); }
  const cache::ProgramCache &cache() const { return cache_; }
  cache::ProgramCache &cache() { return cache_; }

 private:
  struct BuildInputs;
  struct BuildJob;
  /// One programFor call's progress.
  struct Request {
    uint32_t root;
    unsigned place;  // placeFor the root, set as the request starts
    std::string label;
    bool alone = false;     // not linked with the plan's importers
    std::vector<uint32_t> roots = {};  // where it has several (programForRuntime): `root` first
    const backend::RuntimeLoad *runtime = nullptr;  // the runtime that loads the program, if any
    std::vector<uint32_t> ownsTried = {};  // images linked alone for it, to hold their interposed variables
    bool scanned = false;   // the process was scanned for it
    bool built = false;     // this call built a program (and said so)
    int hostsUnloaded = 0;  // how often a host object the plan needs was found unloaded
    /// Another look after a host object the plan needs was found unloaded: the scopes change at
    /// the next scan. Bounded, for an object that is unloading but still listed.
    llvm::Error rescan();
    std::span<const uint32_t> rootsLinked() const { return roots.empty() ? std::span(&root, 1) : std::span(roots); }
  };
  /// A root's plan, resolved completely, with the device that links it and its program's key.
  struct Planned {
    LinkPlan plan;
    backend::Device *device;
    cache::ProgramKey key;
  };

  // programs.cpp: the phases of programFor.
  /// Links image `owner`'s own program first, alone, to hold the instance of its variable another
  /// image interposes (interposedWithoutInstance); the request's label on an error.
  llvm::Error linkOwnProgram(LoaderLock &lock, Request &request, uint32_t owner, unsigned place);
  /// The images' links to a program that is gone cleared, and the images it held let go.
  void dropLinksTo(const cache::LinkedProgram &gone);
  llvm::Expected<Planned> plan(const Request &request);
  /// The request's use of `program`, found in memory, recorded with references on the plan's
  /// host objects.
  llvm::Expected<Outcome<cache::LinkedProgram *>> use(LoaderLock &lock, Request &request, Planned &planned,
                                                      cache::LinkedProgram *program);
  /// Keeps a program made for `uses`, holding `images` while it lives (and its binary, where it
  /// was kept for another device of the model).
  cache::LinkedProgram *keep(BuildJob &job, cache::Built &made, std::vector<cache::LinkedProgram::Use> uses);

  // program_build.cpp: the plan's program built once, with the loaded images that import from
  // it, and kept for the uses it serves.
  llvm::Expected<Outcome<cache::LinkedProgram *>> build(LoaderLock &lock, Request &request, Planned &planned);
  /// Phase 1: what a build needs once the mutex is let go, its images held.
  BuildJob prepare(const Request &request, Planned &planned);
  /// The plan with the loaded images that import from it, their uses into `job`; nullopt where it
  /// is linked alone.
  std::optional<LinkPlan> withImporters(const Request &request, const Planned &planned, BuildJob &job) const;
  /// What the device links for `plan`, copied into the job (`into`: its linked or alone inputs).
  void inputsOf(const LinkPlan &plan, const cache::ProgramKey &key, BuildJob &job, BuildInputs &into) const;
  /// DEVDL_DEBUG=bindings: each import's definition, each definition made local, each instance reached.
  void sayBindings(const LinkPlan &linked, const BuildJob &job) const;
  /// Phase 2: why the job is not built (a second copy of a variable; a build that failed since
  /// the loader last changed, given again): an error, or none.
  std::optional<llvm::Error> refuse(BuildJob &job, const Request &request, const Planned &planned);
  /// Phase 3, with the mutex let go: the job built (with its importers, else alone).
  struct Made;
  Made buildUnlocked(BuildJob &job, const Request &request, const Planned &planned);
  /// The program of `inputs`, its cells set to where the instances it reaches lie.
  llvm::Expected<cache::Built> buildInputs(const BuildJob &job, const BuildInputs &inputs, const cache::SameModel &same,
                                           const Request &request, const Planned &planned);
  /// Phase 4: a failed build's error, said as well as devdl knows why, and remembered.
  llvm::Error explainFailure(BuildJob &job, const Request &request, const Planned &planned, llvm::Error err);
  /// Phase 5: the built program kept for the uses whose roots are still loaded; null where another
  /// serves instead or it would hold a second instance of a variable.
  cache::LinkedProgram *keepBuilt(BuildJob &job, const Planned &planned, Made &made);
  /// Releases the job's holds: its images, the programs it reaches, programs no longer needed.
  void releaseJob(BuildJob &job);

  // instances.cpp: one instance of a loaded image's variables on each device.
  /// Which variables of `plan` a program linked for `device` reaches in the programs that hold
  /// their instances, and which it will hold: into `into` (its inputs' `elsewhere`, its key's).
  void reachInstances(const LinkPlan &plan, const backend::Device *device, BuildInputs &into) const;
  /// An image of the plan whose variable another image interposes, with no program holding the
  /// instance its own code is to reach, that devdl can edit so and has not linked alone for the
  /// request yet; nullopt for none.
  std::optional<uint32_t> interposedWithoutInstance(const Request &request, const Planned &planned) const;
  /// The key of the program linked from `plan`, by its images' hashes, and the images whose
  /// variables it links (each has one instance on a device).
  cache::ProgramKey keyOf(const LinkPlan &plan) const;
  /// The variables of image `id` that have one instance on a device: those it exports, and its
  /// statics by the names they are exported under (LoadedImage::statics).
  std::vector<std::string_view> variablesOf(uint32_t id) const;
  /// Why image `id`'s statics stay its own, which no other program reaches; "" where devdl exports them.
  std::string whyStaticsStay(uint32_t id) const;
  /// How messages name image `id`'s variable `name` (of variablesOf): a static by its own name.
  std::string_view variableShown(uint32_t id, std::string_view name) const;
  /// How messages name a program: by its first use's root, else its first image.
  std::string_view labelOf(const cache::LinkedProgram &program) const;

  // Builds that failed, by device and key: given again, not built again, until the loader
  // changes (Generation), as the images or their scopes may then make another program.
  struct FailedBuild {
    const backend::Device *device;
    cache::ProgramKey key;
    uint64_t generation;
    KeptError error;
  };
  /// The failed build of `key` on `device` since the loader last changed (those of before let go).
  const FailedBuild *findFailedBuild(const backend::Device *device, const cache::ProgramKey &key);
  void rememberFailure(const backend::Device *device, const cache::ProgramKey &key, uint64_t generation,
                       llvm::Error &err);  // `err` of a build prepared at `generation`, copied

  Parts parts_;
  ImageTable &images_;
  cache::ProgramCache cache_;
  std::vector<FailedBuild> failedBuilds_;
  std::vector<uint32_t> owning_;  // images whose own program is being linked to hold their interposed variables
};

}  // namespace devdl
