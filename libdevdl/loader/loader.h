// The loader: handles, reference counts and flags, the process's own images in the host loader's
// order, DEVDL_PRELOAD, lifetimes; and a kernel's program, asked of the parts that decide it:
//
//   resolve/scopes          the global scope, handles' local scopes, DEEPBIND, candidacy
//   resolve/link_plan       the closure of an image's imports
//   cache/program_cache     programs in memory (the nested key) over the binary store (disk)
//   backend/registry        which backend's device links an image
//
// Here: loader.cpp (the entry points and handles), process_scan.cpp (the host's objects and
// DEVDL_PRELOAD), link.cpp (resolution policy, and a kernel's program linked with its importers).
//
// Global scope, in search order: the device images carried by the objects of the running
// process that are in the host's global scope (link-map order: executable, LD_PRELOAD, libraries
// in load order, later RTLD_GLOBAL objects), then the images of handles opened DEVDL_GLOBAL, in
// the order they joined. A handle's local scope is its own images, then the images they record
// as dependencies (devdl/module depends), breadth first.
#pragma once

#include "backend/registry.h"
#include "bundle/loaded_bundles.h"
#include "cache/program_cache.h"
#include "image/read_image.h"
#include "loader/image_table.h"
#include "resolve/link_plan.h"
#include "resolve/scopes.h"

#include <llvm/Support/Error.h>

#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <sys/types.h>
#include <vector>

struct devdl_native;
struct devdl_symbol_info;

namespace devdl {

class Handle {
 public:
  /// What makes a second open the same: the file, or the memory.
  struct Identity {
    dev_t device;
    ino_t inode;
    const void *memory;
    bool operator==(const Identity &) const = default;
  };
  std::string path;  // the file, or the name given with the memory
  Identity identity{};
  unsigned references = 0;
  bool global = false;
  bool nodelete = false;
  bool linkedNow = false;  // its kernels' programs were linked (DEVDL_NOW)
  std::vector<uint32_t> images;  // its own, in file order
  LocalScope local;              // its images, then their recorded dependencies, breadth first; DEEPBIND
  std::vector<Handle *> needed;  // the handles of its dependencies: referenced while it is open
};

class Loader {
 public:
  /// What a loader links with: its backends, the binary store behind its programs (asked for at
  /// the first build), and DEVDL_BACKEND's value ("" for every backend).
  struct Options {
    std::span<const backend::BackendEntry> backends;
    cache::BinaryStore &(*store)();
    std::string backendChoice;
  };
  explicit Loader(Options options);
  Loader(const Loader &) = delete;
  Loader &operator=(const Loader &) = delete;

  /// The process's loader, the C API's: the built-in backends, the disk cache, the environment.
  static Loader &instance();

  llvm::Expected<void *> open(const char *path, int flags);
  llvm::Expected<void *> openMemory(const void *data, size_t size, const char *name, int flags);
  llvm::Expected<void *> symbol(void *handle, std::string_view name);
  llvm::Error close(void *handle);
  llvm::Error native(devdl_native &out);
  llvm::Error attach(const devdl_native &native);
  llvm::Error specialize(void *handle, unsigned specId, std::string_view value);
  llvm::Error symbolInfo(void *handle, std::string_view name, devdl_symbol_info &out);
  llvm::Expected<std::string> planText(void *handle, std::string_view name);

  /// One image as device_dliterate reports it: copied, so callbacks run without the lock.
  struct ImageSnapshot {
    std::string file;
    unsigned index;
    std::string format, target;
    bool global;
    size_t symbols;
  };
  std::vector<ImageSnapshot> snapshot();

 private:
  // All private members are called with mutex_ held.
  Handle *globalHandle() { return reinterpret_cast<Handle *>(&globalScopeTag_); }
  Handle *findHandle(void *handle);
  /// What a name is bound to in a handle's scope: its definition, and for one among the
  /// handle's dependencies the handle's image whose imports reach it.
  struct Found {
    Definition definition;
    std::optional<uint32_t> through;
  };
  llvm::Expected<Found> lookup(void *handle, std::string_view name);
  /// The first definition of `name` among the images the handle's images depend on, with the
  /// handle's image that reaches it; nullopt when none of them defines it.
  std::optional<Found> inDependencies(const Handle &handle, std::string_view name);
  /// The first of the handle's images whose imports reach image `id`; nullopt when none does.
  std::optional<uint32_t> imageReaching(const Handle &handle, uint32_t id);
  /// The images a root image's imports reach, the root first: its program's plan for it where
  /// it has a program, else its plan as the scopes are now.
  std::vector<uint32_t> planOf(uint32_t root);

  // loader.cpp: handles.
  llvm::Expected<Handle *> openFile(const std::string &file, int flags);
  llvm::Expected<Handle *> openMemory(Bytes bytes, std::string name, int flags);
  /// The handle already open for `identity`, referenced once more; null when there is none.
  llvm::Expected<Handle *> reopen(const Handle::Identity &identity, int flags);
  llvm::Expected<Handle *> addHandle(ImageFile read, const Handle::Identity &identity, int flags);
  /// Adds the images the handle's images record as dependencies to its local scope, breadth
  /// first, and references their handles. Fails naming a module no loaded image is.
  llvm::Error addDependencies(Handle &handle);
  /// The loaded image whose module id is `id`: the handle's own first, then the global scope's
  /// in search order, then any other.
  std::optional<uint32_t> findModule(std::string_view id, const Handle &handle) const;
  /// Drops one reference of the handle; at zero, unloads it.
  void release(std::unique_ptr<Handle> &handle);
  /// Links the programs of the handle's kernels (DEVDL_NOW).
  llvm::Error linkNow(Handle &handle);
  void joinGlobalScope(const std::vector<uint32_t> &ids);
  /// Unloads images: out of every scope at once, their plans dropped, and the programs left
  /// with none released, with the images only they held.
  void dropImages(const std::vector<uint32_t> &ids);
  /// References on the host objects carrying images of `plan`, but for the root's own (loaded
  /// while the root is): they stay in memory while the plan is used. Fails naming an image whose
  /// object the host has unloaded meanwhile.
  llvm::Expected<std::vector<std::shared_ptr<const void>>> pinObjects(uint32_t root, std::span<const uint32_t> plan);
  /// Keeps a program made for `uses`, holding `images` while it lives.
  cache::LinkedProgram *keepProgram(std::vector<cache::ContentHash> key, std::vector<uint32_t> images,
                                    std::vector<cache::LinkedProgram::Use> uses, backend::Device *device,
                                    std::unique_ptr<backend::Program> program);

  // process_scan.cpp: the host's objects and DEVDL_PRELOAD.
  llvm::Error scanProcess();
  void loadPreloads();
  /// DEVDL_DEBUG=symbols: the definitions in `ids` that an earlier one in the global scope hides.
  void reportDuplicates(std::span<const uint32_t> ids);

  // link.cpp: resolution and programs.
  /// Whether the device that links image `id` takes it (asked once, then kept).
  bool deviceTakes(uint32_t id);
  std::optional<uint32_t> resolve(std::string_view symbol, uint32_t importer);
  LinkPlan planFor(std::span<const uint32_t> roots);
  /// The plan's unresolved imports as one error naming each symbol and image; success when none.
  llvm::Error unresolvedError(const LinkPlan &plan);
  /// A name the plan binds to two definitions, as an error naming both; success when none.
  llvm::Error conflictError(const LinkPlan &plan);
  llvm::Expected<cache::LinkedProgram *> programFor(uint32_t root);
  /// The loaded images that import, directly or through others, from `plan`'s images, bind to
  /// them, go to `dev` and resolve completely: linked with the plan, a library's code is built
  /// once whichever kernel is asked for first. With the plan of each, in `uses`.
  std::vector<uint32_t> importersOf(const LinkPlan &plan, backend::Device *dev,
                                    std::vector<cache::LinkedProgram::Use> &uses);
  /// Why `image` is no candidate: no device for its family, or the device does not take it.
  std::string whyNotCandidate(const DeviceImage &image);
  /// " (lib.bc: image 0 (spir-bc) defines it, but ...)" for an import that a definition the
  /// device cannot take would have resolved; "" otherwise.
  std::string whyUnresolved(std::string_view symbol, uint32_t importer);

  std::mutex mutex_;
  char globalScopeTag_ = 0;  // its address is the handle of device_dlopen(NULL)
  ImageTable images_;
  Scopes scopes_;
  std::vector<std::unique_ptr<Handle>> handles_;
  // A loaded host object's bundle, by its address in memory.
  struct ProcessBundle {
    bundle::LoadedBundle found;  // as the scan found it: the object, its exports
    bool global = false;
    std::vector<uint32_t> images;
  };
  std::map<const uint8_t *, ProcessBundle> processBundles_;
  uint64_t scannedGeneration_ = ~uint64_t(0);
  bool preloaded_ = false;
  backend::Devices devices_;
  cache::ProgramCache programs_;
};

}  // namespace devdl
