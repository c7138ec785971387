// The process's own images: the host's objects as a view of them found them (host/process_view.h:
// the bundles of the objects loaded now, and the offload tables of those DPC++ built, in link-map
// order, and whether each is in the host's global scope), the files their images need, and
// DEVDL_PRELOAD's images, which take their place after the executable's and LD_PRELOAD's. The
// host loader is asked with the loader's mutex let go; what it said is applied under the mutex.
#pragma once

#include "host/loaded_bundles.h"
#include "host/process_view.h"
#include "loader/candidacies.h"
#include "loader/handles.h"
#include "loader/reading.h"

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace devdl {

class ProcessScan {
 public:
  ProcessScan(ImageTable &images, Scopes &scopes, GlobalScope &globalScope, Handles &handles, Candidacies &candidacies,
              FileReader &reader)
      : images_(images), scopes_(scopes), globalScope_(globalScope), handles_(handles), candidacies_(candidacies),
        reader_(reader) {}

  /// Brings the loader up to what the host loader has loaded now: asked with the mutex let go,
  /// applied under it, and the new images' candidacy decided.
  void scan(LoaderLock &lock);
  /// The loaded object holding `address` whose images are nvcc -rdc=true objects'
  /// (LoadedBundle::Carrier::CudaObjects), as the last scan found it: its path ("" for the
  /// executable) and its images; nullopt where none holds it.
  struct CudaObjects {
    std::string object;
    std::vector<uint32_t> images;
    bool withProgram = false;  // host::LoadedBundle::withProgram
  };
  std::optional<CudaObjects> cudaObjectsAt(const void *address) const;

 private:
  /// What the host loader has loaded and DEVDL_PRELOAD's files, seen with the mutex let go: the
  /// images read with their acceptance.
  struct View {
    host::ProcessView host;
    std::vector<std::optional<std::vector<NewImage>>> images;  // by object of `host`: those read
    /// By object of `host`, where its images were read: each file they need (readNeeded: the
    /// file, then the files it needs).
    std::vector<std::vector<std::vector<OpenedFile>>> needed;
    /// Each DEVDL_PRELOAD file (readNeeded: the file, then the files it needs).
    using Preload = std::vector<OpenedFile>;
    std::optional<std::vector<Preload>> preloads;  // before the first scan
  };
  /// A loaded host object's bundle.
  struct Bundle {
    host::LoadedBundle found;  // as the scan found it: the object, its exports
    bool global = false;
    bool told = true;  // its exports told whether it is global: else asked again at each scan
    std::vector<uint32_t> images;
    /// The handles of the files its images need (devdl/module needed), referenced while it is
    /// loaded: global while it is, as a host library's DT_NEEDED libraries are.
    std::vector<Handle *> needed;
    /// Where its images' imports resolve after the global scope, as the host loader resolves an
    /// object opened RTLD_LOCAL: its object's images and the files they need, then those of the
    /// objects it needs (host::LoadedBundle::needs), breadth first.
    LocalScope local;
  };

  View observe(LoaderLock &lock);
  void apply(View view);
  /// Bundles of objects the host has unloaded, dropped; new objects' bundles added; promotions to
  /// the host's global scope followed.
  void applyObjects(View &view);
  void followUnloads(const host::ProcessView &host);
  std::map<const uint8_t *, Bundle>::iterator addBundle(host::ProcessView::Object &object, std::vector<NewImage> &images,
                                                        std::vector<std::vector<OpenedFile>> &needed);
  /// The bundle's images join the global scope, or leave it, as the host says of its object.
  void followGlobal(Bundle &bundle, const host::ProcessView::Object &object);
  /// Each bundle's local scope made again from the bundles loaded now: once bundles came or went,
  /// or what an object needs changed (a scan may list an object opened with dlopen before the
  /// host loader listed all it needs).
  void makeLocalScopes();
  /// DEVDL_PRELOAD's files, right after the executable and the LD_PRELOAD objects.
  void applyPreloads(std::vector<View::Preload> &preloads);
  std::vector<View::Preload> readPreloads() const;
  /// The files the images of a host object need, each with those it needs (readNeeded), with the
  /// mutex let go; what cannot be found or read is said (a warning) and passed over.
  std::vector<std::vector<OpenedFile>> readNeededOf(const host::LoadedBundle &object, const std::vector<NewImage> &images,
                                                    const std::vector<FileIdentity> &open) const;
  /// Handles for what readNeededOf read, referenced by the object's bundle.
  void addNeeded(Bundle &bundle, std::vector<std::vector<OpenedFile>> &needed);
  /// The handle of a file's batch (itself, then what it needs): the one open, referenced once
  /// more, or new ones with `flags`, made global with DEVDL_GLOBAL either way; null, said with
  /// `what`, where it cannot be added (and nothing added stays: Handles::Open).
  Handle *handleFor(std::vector<OpenedFile> &batch, int flags, const std::string &what);

  ImageTable &images_;
  Scopes &scopes_;
  GlobalScope &globalScope_;
  Handles &handles_;
  Candidacies &candidacies_;
  FileReader &reader_;
  std::map<const uint8_t *, Bundle> bundles_;  // by the bundle's address in memory
  uint64_t scannedGeneration_ = 0;
  bool scanned_ = false;
  bool preloaded_ = false;
};

}  // namespace devdl
