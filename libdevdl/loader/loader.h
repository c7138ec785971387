// The loader: handles, reference counts and flags, the process's own images in the host loader's
// order, DEVDL_PRELOAD, lifetimes; and a kernel's program, asked of the parts that decide it:
//
//   resolve/scopes          the global scope, handles' local scopes, DEEPBIND, candidacy
//   resolve/link_plan       the closure of an image's imports, interposition by symbol
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
//
// Locking. One mutex guards the loader's own data, and is never held while calling the host
// loader (dl_iterate_phdr, dlopen, dlsym, dlclose) or a backend (opening a device, linking,
// making a kernel, releasing a program): host constructors run under glibc's lock and may call
// devdl, and a backend may load libraries. An entry point lets the mutex go for such work and
// takes it again; what it releases under the mutex is destroyed once it lets go. Builds run
// without the mutex, one per program at a time. Lookups of what was found before take no lock
// at all (a cache per thread, checked against a generation every change moves).
#pragma once

#include "backend/registry.h"
#include "bundle/loaded_bundles.h"
#include "cache/disk_cache.h"
#include "cache/program_cache.h"
#include "image/read_image.h"
#include "loader/image_table.h"
#include "resolve/link_plan.h"
#include "resolve/scopes.h"

#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/Support/Error.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <sys/types.h>
#include <utility>
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
    size_t size;  // of the memory: the same address with another size holds another image
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
    /// How long a thread that may hold the host loader's lock waits for another's work it needs
    /// (a device opened, a program built) before it does that work itself: the other thread may
    /// wait for that lock (support/waiting.h). One shown not to hold it waits as long as it takes.
    std::chrono::milliseconds hostLockWait{1000};
    /// The disk cache that keeps image files' summaries (cache/image_summary.h); none where null.
    cache::DiskCache &(*summaries)() = nullptr;
  };
  explicit Loader(Options options);
  ~Loader();
  Loader(const Loader &) = delete;
  Loader &operator=(const Loader &) = delete;

  /// The process's loader, the C API's: the built-in backends, the disk cache, the environment.
  static Loader &instance();

  llvm::Expected<void *> open(const char *path, int flags);
  llvm::Expected<void *> openMemory(const void *data, size_t size, const char *name, int flags);
  llvm::Expected<void *> symbol(void *handle, std::string_view name);
  /// How many symbol() calls took the lock: a thread's first lookup of a name in a handle, and
  /// the first after a change; the others are answered from what the thread found before.
  uint64_t lookupsUnderLock() const { return lookupsUnderLock_.load(std::memory_order_relaxed); }
  llvm::Error close(void *handle);
  llvm::Error native(devdl_native &out);
  llvm::Error attach(const devdl_native &native);
  llvm::Error specialize(void *handle, unsigned specId, std::string_view value);
  /// Copies between `host` and the device variable `name` of the handle's scope (the instance
  /// device_dlsym would give), from `offset` on: into it with `toDevice`, else out of it.
  llvm::Error copy(void *handle, std::string_view name, size_t offset, void *host, size_t size, bool toDevice);
  /// The same for the device global registered at host address `object` (seed 002): its unique
  /// id, defined by an image of the handle's scope (`SYCL/device globals`).
  llvm::Error copyObject(void *handle, const void *object, size_t offset, void *host, size_t size, bool toDevice);
  /// Sets the specialization constant registered at host address `object` from `value` (the host
  /// object's bytes): each SpecId its unique id maps to in the handle's images, from its part of
  /// `value`.
  llvm::Error specializeObject(void *handle, const void *object, std::string_view value);
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
  /// mutex_ held; let go for work outside, and at the end, when what was released under it
  /// (programs, references on host objects) is destroyed.
  class Lock {
   public:
    explicit Lock(Loader &loader) : loader_(loader), lock_(loader.mutex_) {}
    ~Lock() { release(); }
    Lock(const Lock &) = delete;
    Lock &operator=(const Lock &) = delete;
    /// Lets the mutex go and destroys what was released under it.
    void release();
    void acquire() { lock_.lock(); }
    std::unique_lock<std::mutex> &held() { return lock_; }

   private:
    Loader &loader_;
    std::unique_lock<std::mutex> lock_;
  };

  /// An image read with the lock let go, and whether the device that links it takes it (asked
  /// then, or Unknown where asking would have opened a device: see judgeUndecided).
  struct NewImage {
    DeviceImage image;
    LoadedImage::Candidacy candidacy;
    std::string whyNot;
  };
  /// What the host loader has loaded, seen with the lock let go.
  struct ProcessView {
    uint64_t generation = 0;
    bool listed = false;  // `objects` are every loaded bundle: objects were loaded or unloaded
    struct Object {
      bundle::LoadedBundle found;
      bool global = false;
      bool told = true;  // its exports told whether it is global (bundle::inGlobalScope)
      std::optional<std::vector<NewImage>> images;  // read for a bundle the loader did not know
    };
    std::vector<Object> objects;  // in link-map order; unlisted: the known ones not told global
    struct Preload {
      std::string path;
      Handle::Identity identity;
      std::vector<NewImage> images;
    };
    std::optional<std::vector<Preload>> preloads;  // DEVDL_PRELOAD's files, before the first scan
  };

  // All private members but those taking a Lock are called with mutex_ held and call neither the
  // host loader nor a backend.
  Handle *globalHandle() { return reinterpret_cast<Handle *>(&globalScopeTag_); }
  Handle *findHandle(void *handle);
  Handle *findHandle(const Handle::Identity &identity);
  /// Moves the generation: a lookup remembered before may give another answer now.
  static void changed();

  /// What a name is bound to in a handle's scope: its definition, and for one among the
  /// handle's dependencies the handle's image whose imports reach it.
  struct Found {
    Definition definition;
    std::optional<uint32_t> through;
  };
  llvm::Expected<Found> lookup(Lock &lock, void *handle, std::string_view name);
  /// The program a name found in a handle's scope is taken from (linked now if need be), with
  /// the definition and its image's label; the lock is let go when it returns.
  struct Bound {
    std::shared_ptr<backend::Program> program;
    Definition definition;
    std::string label;
    const void *hostAddress;  // in the host object whose image it is, for the global scope's lookups
  };
  llvm::Expected<Bound> bind(Lock &lock, void *handle, std::string_view name);
  /// The registered object at `object` of `kind`, and the first image of the handle's scope
  /// (its images, then the global scope) that `has` it: its unique id and the image's id.
  llvm::Expected<std::pair<std::string, uint32_t>> objectIn(Lock &lock, void *handle, const void *object,
                                                            std::string_view kind, std::string_view what,
                                                            llvm::function_ref<bool(const DeviceImage &,
                                                                                    std::string_view)> has);
  /// The first definition of `name` among the images the handle's images depend on, with the
  /// handle's image that reaches it; nullopt when none of them defines it.
  std::optional<Found> inDependencies(const Handle &handle, std::string_view name);
  /// The first of the handle's images whose imports reach image `id`; nullopt when none does.
  std::optional<uint32_t> imageReaching(const Handle &handle, uint32_t id);
  /// The plan a root image's program was linked from for it; null where it has no program.
  const LinkPlan *linkedPlan(uint32_t root) const;
  /// The images a root image's imports reach, the root first: its program's plan for it where
  /// it has a program, else its plan as the scopes are now.
  std::vector<uint32_t> planOf(uint32_t root);

  // loader.cpp: handles.
  /// The images of a file, with the lock let go: from its summary where the disk cache has one,
  /// else read (and summarized for the next process).
  llvm::Expected<ImageFile> readFile(const std::shared_ptr<const RegularFile> &file);
  /// Images of a file or memory, read with the lock let go, each judged (see judge()).
  std::vector<NewImage> prepare(ImageFile read, bool mayOpenDevice);
  /// The handle for `identity` (named `name` in errors): the one open, or a new one from what
  /// `read` reads with the lock let go.
  llvm::Expected<Handle *> openIdentified(Lock &lock, const Handle::Identity &identity, int flags,
                                          const std::string &name,
                                          llvm::function_ref<llvm::Expected<ImageFile>()> read);
  /// An open handle, referenced once more (linked now with DEVDL_NOW).
  llvm::Expected<Handle *> reopen(Lock &lock, Handle &handle, int flags);
  /// A new handle for `images`, in the scopes: its dependencies found, DEVDL_GLOBAL joined (not
  /// linked: DEVDL_NOW is its caller's). Fails, leaving nothing, naming a missing dependency.
  llvm::Expected<Handle *> addHandle(std::string name, std::vector<NewImage> images, const Handle::Identity &identity,
                                     int flags);
  /// Adds the images the handle's images record as dependencies to its local scope, breadth
  /// first, and references their handles. Fails naming a module no loaded image is.
  llvm::Error addDependencies(Handle &handle);
  /// The loaded image whose module id is `id`: the handle's own first, then the global scope's
  /// in search order, then any other.
  std::optional<uint32_t> findModule(std::string_view id, const Handle &handle) const;
  /// Links the programs of the handle's kernels and resolves its other images (DEVDL_NOW).
  llvm::Error linkNow(Lock &lock, Handle &handle);
  /// Drops one reference of the handle; at zero, unloads it.
  void release(Handle *handle);
  void joinGlobalScope(const std::vector<uint32_t> &ids);
  /// Unloads images: out of every scope at once, their plans dropped, and the programs left
  /// with none released, with the images only they held.
  void dropImages(const std::vector<uint32_t> &ids);
  /// Keeps a program made for `uses`, holding `images` while it lives.
  cache::LinkedProgram *keepProgram(std::vector<cache::ContentHash> key, std::vector<uint32_t> images,
                                    std::vector<cache::LinkedProgram::Use> uses, backend::Device *device,
                                    std::shared_ptr<backend::Program> program);

  // process_scan.cpp: the host's objects and DEVDL_PRELOAD.
  /// Brings the loader up to what the host loader has loaded now: asked with the lock let go.
  void scanProcess(Lock &lock);
  ProcessView observeProcess(Lock &lock);
  void applyProcess(ProcessView view);
  std::vector<ProcessView::Preload> readPreloads();
  /// DEVDL_DEBUG=symbols: the definitions in `ids` that an earlier one in the global scope hides;
  /// those of images not judged yet once they are (after judgeUndecided).
  void reportDuplicates(std::span<const uint32_t> ids);

  // link.cpp: resolution and programs.
  /// Whether the device that links image `id` takes it (decided when the image arrived, or by
  /// judgeUndecided).
  bool deviceTakes(uint32_t id) const;
  /// Whether the device that links `image` takes it, and why not: asked with the lock let go (it
  /// may open the device, or ask the driver of a native binary).
  std::pair<LoadedImage::Candidacy, std::string> judgment(const DeviceImage &image);
  /// `image` with its judgment. Without `mayOpenDevice` (a scan of the host's objects, maybe in a host constructor: the
  /// OpenCL ICD loader, once started, loads its vendors under a lock of its own) it is left
  /// Unknown where asking would open a device.
  NewImage judge(DeviceImage image, bool mayOpenDevice);
  /// Judges the loaded images left Unknown (undecided_), with the lock let go: opening their
  /// devices where needed. Called before anything resolves.
  void judgeUndecided(Lock &lock);
  /// The definition an import binds to; an image of a virtual-function set only where `pulled`
  /// has it (the set's images join a program by the sets its images call or create).
  std::optional<uint32_t> resolve(std::string_view symbol, uint32_t importer, const llvm::DenseSet<uint32_t> &pulled);
  /// The images `roots` need: their imports' closure, and the images of the virtual-function sets
  /// its images call or create (seed 003's discovery), found in the first root's scope.
  LinkPlan planFor(std::span<const uint32_t> roots);
  /// Adds to `into` the images of the sets `image` calls or creates that are not in `pulled`.
  void pullSets(uint32_t image, const llvm::StringMap<std::vector<uint32_t>> &members,
                llvm::DenseSet<uint32_t> &pulled, std::vector<uint32_t> &into, LinkPlan &plan);
  /// The plan's unresolved imports as one error naming each symbol and image; success when none.
  llvm::Error unresolvedError(const LinkPlan &plan);
  /// A name the plan binds to two definitions, as an error naming both; success when none.
  llvm::Error conflictError(const LinkPlan &plan);
  /// The program a root image's kernels are looked up in: in memory, else built with the lock
  /// let go (or another thread's build waited for). The root may have been unloaded when it
  /// returns: callers hold what they need.
  llvm::Expected<cache::LinkedProgram *> programFor(Lock &lock, uint32_t root);
  /// A host object carrying images, as pin() takes a reference on it: copied, since the loader
  /// drops its bundle once the host unloads it, which may be while the lock is let go.
  struct HostObject {
    std::string path;
    uintptr_t base = 0;
    bool operator==(const HostObject &) const = default;
  };
  /// The host objects carrying images of `plan` but for `except`'s (loaded while it is).
  std::vector<HostObject> hostsOf(std::span<const uint32_t> plan, const bundle::LoadedBundle *except) const;
  /// References on `hosts`, taken with the lock let go: null where the host has unloaded one.
  static std::optional<std::vector<std::shared_ptr<const void>>> pin(const std::vector<HostObject> &hosts);
  /// The loaded images that import, directly or through others, from `plan`'s images, bind to
  /// them, go to `dev` and resolve completely: linked with the plan, a library's code is built
  /// once whichever kernel is asked for first. With the plan of each, in `uses`.
  std::vector<uint32_t> importersOf(const LinkPlan &plan, backend::Device *dev,
                                    std::vector<cache::LinkedProgram::Use> &uses);
  /// " (lib.bc: image 0 (spir-bc) defines it, but ...)" for an import that a definition the
  /// device cannot take would have resolved; "" otherwise.
  std::string whyUnresolved(std::string_view symbol, uint32_t importer);

  std::mutex mutex_;
  std::atomic<uint64_t> lookupsUnderLock_{0};
  std::condition_variable built_;  // a build finished
  std::vector<std::shared_ptr<const void>> released_;  // to destroy once mutex_ is let go
  char globalScopeTag_ = 0;  // its address is the handle of device_dlopen(NULL)
  ImageTable images_;
  std::vector<uint32_t> undecided_;  // loaded images whose candidacy is Unknown
  std::vector<uint32_t> unreported_;  // joined the global scope undecided: DEVDL_DEBUG=symbols waits
  Scopes scopes_;
  std::vector<std::unique_ptr<Handle>> handles_;
  // A loaded host object's bundle, by its address in memory.
  struct ProcessBundle {
    bundle::LoadedBundle found;  // as the scan found it: the object, its exports
    bool global = false;
    bool told = true;  // its exports told whether it is global: else asked again at each scan
    std::vector<uint32_t> images;
  };
  std::map<const uint8_t *, ProcessBundle> processBundles_;
  uint64_t scannedGeneration_ = 0;
  bool scanned_ = false;
  bool preloaded_ = false;
  backend::Devices devices_;
  cache::ProgramCache programs_;
  // Programs being built with the lock let go, by device and key: another thread needing one
  // waits for it (support/waiting.h).
  struct Building {
    bool done = false;
  };
  const std::chrono::milliseconds hostLockWait_;
  cache::DiskCache &(*const summaries_)();
  std::map<std::pair<const backend::Device *, std::vector<cache::ContentHash>>, std::shared_ptr<Building>> building_;
};

}  // namespace devdl
