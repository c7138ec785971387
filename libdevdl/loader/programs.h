// A kernel's program: its root image's imports resolved into a link plan (the planner), the plan's
// program from the program cache (in memory, else built once: the binary store's, else linked),
// linked with the loaded images that import from it so that a library's code is built once, and
// one instance of each loaded image's variables on a device (loader/instances.h). Builds run with
// the loader's mutex let go (docs/architecture.md, "Threads"), one Programs::Build each
// (loader/build_job.h); those that failed are remembered (FailedBuilds).
#pragma once

#include "backend/registry.h"
#include "cache/program_cache.h"
#include "loader/image_table.h"
#include "loader/instances.h"
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

/// Builds that failed, by device and key: given again, not built again, until the loader changes
/// (Generation), as the images or their scopes may then make another program.
class FailedBuilds {
 public:
  struct FailedBuild {
    const backend::Device *device;
    cache::ProgramKey key;
    uint64_t generation;
    KeptError error;
  };
  /// The failed build of `key` on `device` since the loader last changed (those of before let go).
  const FailedBuild *find(const backend::Device *device, const cache::ProgramKey &key);
  void remember(const backend::Device *device, const cache::ProgramKey &key, uint64_t generation,
                llvm::Error &err);  // `err` of a build prepared at `generation`, copied

 private:
  std::vector<FailedBuild> failed_;
};

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
      : parts_(std::move(parts)), images_(parts_.images), cache_(store, hostLockWait), instances_(images_, cache_) {}

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
  struct BuildJob;
  struct Made;
  class Build;
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
  /// An image of the plan whose variable another image interposes, with no program holding the
  /// instance its own code is to reach, that devdl can edit so and has not linked alone for the
  /// request yet (Instances::unheldInterposed); nullopt for none.
  std::optional<uint32_t> interposedWithoutInstance(const Request &request, const Planned &planned) const;
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

  Parts parts_;
  ImageTable &images_;
  cache::ProgramCache cache_;
  Instances instances_;
  FailedBuilds failedBuilds_;
  std::vector<uint32_t> owning_;  // images whose own program is being linked to hold their interposed variables
};

}  // namespace devdl
