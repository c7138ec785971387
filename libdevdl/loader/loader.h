// The loader: handles, reference counts and flags, the process's own images in the host loader's
// order, DEVDL_PRELOAD, lifetimes; and a kernel's program, asked of the parts that decide it:
//
//   host/process_view       what the host loader has loaded (asked without the lock)
//   resolve/scopes          the global scope, handles' local scopes, DEEPBIND
//   resolve/planner         every link plan: resolution over the scopes, candidacy, sets
//   cache/program_cache     programs in memory (the nested key), built once, over the binary store
//   backend/registry        which backend's device links an image
//
// Here: loader.cpp (the entry points and handles), needed.cpp (the files and modules a handle's
// images need, and its local scope), lookup.cpp (what a name is bound to, and
// device_dlsym), queries.cpp (variables, registered objects, plans, the image list),
// process_scan.cpp (the host's objects and DEVDL_PRELOAD applied), programs.cpp (candidacy, and
// a kernel's program in steps), instances.cpp (one instance of an image's variables on a device).
//
// Global scope, in search order: the device images carried by the objects of the running
// process that are in the host's global scope (link-map order: executable, LD_PRELOAD, libraries
// in load order, later RTLD_GLOBAL objects), then the images of handles opened DEVDL_GLOBAL, in
// the order they joined. A handle's local scope is its own images, then the images they need,
// breadth first, each once: the files they name (devdl/module needed, opened with the handle, as
// ld.so opens DT_NEEDED libraries) and the modules they depend on (devdl/module depends).
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
#include "cache/disk_cache.h"
#include "cache/program_cache.h"
#include "host/loaded_bundles.h"
#include "host/process_view.h"
#include "image/read_image.h"
#include "loader/image_table.h"
#include "resolve/link_plan.h"
#include "resolve/planner.h"
#include "resolve/scopes.h"
#include "support/error.h"
#include "support/regular_file.h"

#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/ADT/StringSet.h>
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

struct devdl_addr_info;
struct devdl_native;
struct devdl_symbol_info;

namespace devdl {

class Handle {
 public:
  /// What makes a second open the same: the file, unchanged since it was read (its size and
  /// modification time: one written over in place is another), or the memory.
  struct Identity {
    dev_t device;
    ino_t inode;
    const void *memory;
    size_t size;  // the same address, or inode, with another size holds another image
    int64_t modified = 0;  // in nanoseconds, for a file
    bool operator==(const Identity &) const = default;
    static Identity of(const RegularFile &file) {
      const struct stat &status = file.status();
      return {status.st_dev, status.st_ino, nullptr, static_cast<size_t>(status.st_size),
              int64_t(status.st_mtim.tv_sec) * 1000000000 + status.st_mtim.tv_nsec};
    }
  };
  std::string path;  // the file, or the name given with the memory
  Identity identity{};
  /// The file, kept open while the handle lives, as ld.so's mapping keeps a library's: its inode
  /// is not given to another file, which would then have its identity. Null for memory.
  std::shared_ptr<const RegularFile> file;
  unsigned references = 0;
  bool global = false;
  bool nodelete = false;
  bool linkedNow = false;  // its kernels' programs were linked (DEVDL_NOW)
  std::vector<uint32_t> images;  // its own, in file order
  LocalScope local;              // its images, then what they need, breadth first; DEEPBIND
  /// The handles of the images its local scope took from others: referenced while it is open. Not
  /// those opened with it before it, by the same open: a cycle of needed files is held by its first.
  std::vector<Handle *> needed;
};

/// A handle on a device of its own (device_dlview): its lookups link the images that device's
/// backend links for that device, the others for their default devices. It lives as long as its
/// handle, and holds no reference of it.
struct View {
  void *handle;    // a Handle, or the global scope's
  unsigned place;  // its device's place among the loader's (Loader::places_)
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
  /// The view of `handle` (a handle, the global scope's, or a view) on the device `native` names:
  /// the same one for the same device and context.
  llvm::Expected<void *> view(void *handle, const devdl_native &native);
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
  /// The symbol of a linked program that `address` belongs to (device_dladdr): a variable it lies
  /// in, or a function that starts there; NotFound where no program holds it.
  llvm::Error addressInfo(const void *address, devdl_addr_info &out);
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

  /// An image read with the lock let go, and its candidacy (decided then, or Undecided where
  /// deciding would have opened a device: see decideCandidacies).
  struct NewImage {
    DeviceImage image;
    Candidacy candidacy;
    std::string whyNot;
  };
  /// A file an open reads with the lock let go (or its memory), and then each file its images need.
  struct OpenedFile {
    std::string name;  // its path as found (or the memory's name)
    bool isFile;       // $ORIGIN is its directory
    Handle::Identity identity;
    bool open;  // a handle had it when the lock was let go: not read, and what it needs is its handle's
    std::vector<NewImage> images;
    std::vector<std::vector<size_t>> needs;  // by image: the files it needs, as indexes among the open's
    std::shared_ptr<const RegularFile> file;  // for its handle (Handle::file); null for memory
  };
  /// What the host loader has loaded (host/process_view.h) and DEVDL_PRELOAD's files, seen with
  /// the lock let go: the images read with their candidacy.
  struct ProcessView {
    host::ProcessView host;
    std::vector<std::optional<std::vector<NewImage>>> images;  // by object of `host`: those read
    /// By object of `host`, where its images were read: each file they need (readNeeded: the
    /// file, then the files it needs).
    std::vector<std::vector<std::vector<OpenedFile>>> needed;
    /// Each DEVDL_PRELOAD file (readNeeded: the file, then the files it needs).
    using Preload = std::vector<OpenedFile>;
    std::optional<std::vector<Preload>> preloads;  // before the first scan
  };

  // All private members but those taking a Lock are called with mutex_ held and call neither the
  // host loader nor a backend.
  Handle *globalHandle() { return reinterpret_cast<Handle *>(&globalScopeTag_); }
  Handle *findHandle(void *handle);
  /// What a pointer the API was given names: a handle (or the global scope's) on the default
  /// devices (place 0), or a view's handle on its place; nullopt for neither.
  struct Target {
    void *handle;
    unsigned place;
  };
  std::optional<Target> targetOf(void *pointer) const;
  /// The place whose device links `image` for a lookup at `place`: `place` where its device's
  /// backend links the image's family, else 0 (its default device).
  unsigned placeFor(const DeviceImage &image, unsigned place) const;
  /// The device that links `image` at `place` (placeFor).
  llvm::Expected<backend::Device *> deviceAt(const DeviceImage &image, unsigned place);
  Handle *findHandle(const Handle::Identity &identity);
  /// Moves the generation: a lookup remembered before may give another answer now.
  static void changed();

  // lookup.cpp: what a name is bound to.
  /// What a name is bound to in a handle's scope: its definition, and for one among the
  /// handle's dependencies the handle's image whose imports reach it; on the devices of `place`
  /// (the view's, if looked up in a view).
  struct Found {
    Definition definition;
    std::optional<uint32_t> through;
    unsigned place;
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
  /// The first definition of `name` among the images the handle's images depend on, with the
  /// handle's image that reaches it; nullopt when none of them defines it.
  std::optional<Found> inDependencies(const Handle &handle, std::string_view name, unsigned place);
  /// The first of the handle's images whose imports reach image `id`; nullopt when none does.
  std::optional<uint32_t> imageReaching(const Handle &handle, uint32_t id, unsigned place);
  /// The plan a root image's program at `place` was linked from for it; null where it has none.
  const LinkPlan *linkedPlan(uint32_t root, unsigned place) const;
  /// The plan of a root image at `place`: its program's plan for it where it has a program (what
  /// its kernels run, libraries closed since included), else its plan as the scopes are now,
  /// made in `made`.
  const LinkPlan &planOf(uint32_t root, unsigned place, std::optional<LinkPlan> &made);

  // queries.cpp.
  /// The registered object at `object` of `kind`, and the first image of the handle's scope
  /// (its images, then the global scope) that `has` it: its unique id and the image's id.
  llvm::Expected<std::pair<std::string, uint32_t>> objectIn(Lock &lock, void *handle, const void *object,
                                                            std::string_view kind, std::string_view what,
                                                            llvm::function_ref<bool(const DeviceImage &,
                                                                                    std::string_view)> has);

  // loader.cpp: handles (readNeeded, addHandles, addDependencies, findModule and makeGlobal in needed.cpp).
  /// The images of a file, with the lock let go: from its summary where the disk cache has one,
  /// else read (and summarized for the next process).
  llvm::Expected<ImageFile> readFile(const std::shared_ptr<const RegularFile> &file);
  /// Images of a file or memory, read with the lock let go, each with its candidacy.
  std::vector<NewImage> prepare(ImageFile read, bool mayOpenDevice);
  /// The handle for `identity` (named `name` in errors): the one open, or a new one from what
  /// `read` reads with the lock let go, with the files its images need (`file`, where it is one:
  /// $ORIGIN is its directory, and its handle keeps it open).
  llvm::Expected<Handle *> openIdentified(Lock &lock, const Handle::Identity &identity, int flags,
                                          const std::string &name, std::shared_ptr<const RegularFile> file,
                                          llvm::function_ref<llvm::Expected<ImageFile>()> read);
  /// `first`, then the files its images need, breadth first, each once, found by name from the
  /// image that needs each (files.h) and read with the lock let go; those of `open` are not read.
  /// Fails naming a file not found and what needs it.
  llvm::Expected<std::vector<OpenedFile>> readNeeded(OpenedFile first, const std::vector<Handle::Identity> &open,
                                                     bool mayOpenDevice);
  /// A file found for an open (a needed one, a host object's, DEVDL_PRELOAD's), read with its
  /// images' candidacy, with the lock let go, unless `open` has it.
  llvm::Expected<OpenedFile> readOpened(RegularFile file, const std::vector<Handle::Identity> &open,
                                        bool mayOpenDevice);
  /// The handles of the files an open read (readNeeded): those open, and new ones for the others,
  /// their local scopes made; the first's, or null where one open before is gone (look again).
  /// With DEVDL_GLOBAL the new ones join the global scope. Fails, leaving nothing, naming a
  /// missing dependency.
  llvm::Expected<Handle *> addHandles(std::vector<OpenedFile> &files, int flags);
  /// An open handle, referenced once more (linked now with DEVDL_NOW).
  llvm::Expected<Handle *> reopen(Lock &lock, Handle &handle, int flags);
  /// A new handle for `images`, in the scopes: its dependencies found, DEVDL_GLOBAL joined (not
  /// linked: DEVDL_NOW is its caller's). Fails, leaving nothing, naming a missing dependency.
  llvm::Expected<Handle *> addHandle(std::string name, std::vector<NewImage> images, const Handle::Identity &identity,
                                     int flags);
  /// Adds what the handle's images need to its local scope, breadth first: the images of the
  /// files they need (LoadedImage::needs), and those of the modules they depend on; references
  /// their handles but `unheld`. Fails naming a module no loaded image is.
  llvm::Error addDependencies(Handle &handle, std::span<Handle *const> unheld = {});
  /// The loaded image whose module id is `id`: the handle's own first, then the global scope's
  /// in search order, then any other.
  std::optional<uint32_t> findModule(std::string_view id, const Handle &handle) const;
  /// Links the programs of the handle's kernels and resolves its other images (DEVDL_NOW), on the
  /// devices of `place`; resolves the images of the handles it holds, which are linked as used.
  llvm::Error linkNow(Lock &lock, Handle &handle, unsigned place = 0);
  /// The handle, and those it holds, join the global scope (DEVDL_GLOBAL), as dlopen's
  /// RTLD_GLOBAL makes an object and its dependencies global: those that joined now.
  std::vector<Handle *> makeGlobal(Handle &handle);
  /// Success where every import image `id` reaches resolves at `place` (nothing is linked).
  llvm::Error resolvesNow(uint32_t id, unsigned place);
  /// Drops one reference of the handle; at zero, unloads it.
  void release(Handle *handle);
  void joinGlobalScope(const std::vector<uint32_t> &ids);
  /// Unloads images: out of every scope at once, their plans dropped, and the programs left
  /// with none released, with the images only they held.
  void dropImages(const std::vector<uint32_t> &ids);
  /// Drops the plans rooted at `roots` and releases the programs no longer needed
  /// (cache::LinkedProgram::needed), with the images only they held.
  void dropPrograms(std::span<const uint32_t> roots);
  /// Keeps a program made for `uses`, holding `images` while it lives (and its binary, where it
  /// was kept for another device of the model).
  cache::LinkedProgram *keepProgram(cache::ProgramKey key, std::vector<uint32_t> images,
                                    std::vector<std::vector<std::string_view>> hidden,
                                    std::vector<cache::LinkedProgram::Use> uses, backend::Device *device,
                                    std::shared_ptr<backend::Program> program,
                                    std::shared_ptr<const std::string> binary);

  // process_scan.cpp: the host's objects and DEVDL_PRELOAD.
  /// Brings the loader up to what the host loader has loaded now: asked with the lock let go.
  void scanProcess(Lock &lock);
  ProcessView observeProcess(Lock &lock);
  void applyProcess(ProcessView view);
  std::vector<ProcessView::Preload> readPreloads();
  /// The files the images of a host object need, each with those it needs (readNeeded), with the
  /// lock let go; what cannot be found or read is said (a warning) and passed over.
  std::vector<std::vector<OpenedFile>> readNeededOf(const host::LoadedBundle &object, const std::vector<NewImage> &images,
                                                    const std::vector<Handle::Identity> &open);
  /// Handles for what readNeededOf read, referenced by the object's bundle.
  struct ProcessBundle;
  void addNeeded(ProcessBundle &pb, std::vector<std::vector<OpenedFile>> &needed);
  /// DEVDL_DEBUG=symbols: the definitions in `ids` that an earlier one in the global scope hides;
  /// those of undecided images once decided (after decideCandidacies).
  void reportDuplicates(std::span<const uint32_t> ids);

  // programs.cpp: candidacy, and a kernel's program.
  Planner planner(unsigned place = 0) const { return Planner(images_, scopes_, place); }
  /// Whether the device that links `image` takes it, and why not: asked with the lock let go (it
  /// may open the device, or ask the driver of a native binary).
  std::pair<Candidacy, std::string> candidacyOf(const DeviceImage &image);
  /// Whether `device` takes `image`, and why not: asked with the lock let go.
  static std::pair<Candidacy, std::string> candidacyOn(llvm::Expected<backend::Device *> device,
                                                       const DeviceImage &image);
  /// `image` with its candidacy. Without `mayOpenDevice` (a scan of the host's objects, maybe in
  /// a host constructor: the OpenCL ICD loader, once started, loads its vendors under a lock of
  /// its own) it is left Undecided where deciding would open a device.
  NewImage withCandidacy(DeviceImage image, bool mayOpenDevice);
  /// Decides the candidacy of the loaded images left Undecided (undecided_), with the lock let
  /// go: opening their devices where needed. Called before anything resolves.
  void decideCandidacies(Lock &lock);
  /// The same for the images not yet decided at `place` (a view's device), after the default
  /// devices': images its device's backend does not link are as on their default devices.
  void decideCandidacies(Lock &lock, unsigned place);
  /// Asks `ask` of the images `ids` with the lock let go (they are held meanwhile, their host
  /// objects referenced), then hands each still loaded its answer under the lock (`keep`).
  void decideWithLockLetGo(Lock &lock, const std::vector<uint32_t> &ids,
                           llvm::function_ref<std::pair<Candidacy, std::string>(const DeviceImage &)> ask,
                           llvm::function_ref<void(LoadedImage &, Acceptance)> keep);
  /// The program a root image's kernels are looked up in: in memory, else built with the lock
  /// let go (or another thread's build waited for), in steps: plan, find (holding the plan's
  /// host objects while it uses the program), else build (take the turn, build, record the uses).
  /// A step that let the lock go may find things changed: the steps start again. The root may
  /// have been unloaded when it returns: callers hold what they need.
  /// `alone`: not linked with the loaded images that import from the plan (the program that is
  /// to hold an image's interposed variables).
  llvm::Expected<cache::LinkedProgram *> programFor(Lock &lock, uint32_t root, unsigned place, bool alone = false);
  /// One programFor call's progress.
  struct ProgramRequest {
    uint32_t root;
    unsigned place;  // placeFor the root, set as the request starts
    std::string label;
    bool alone = false;     // not linked with the plan's importers
    std::vector<uint32_t> ownsTried = {};  // images linked alone for it, to hold their interposed variables
    bool scanned = false;   // the process was scanned for it
    bool built = false;     // this call built a program (and said so)
    int hostsUnloaded = 0;  // how often a host object the plan needs was found unloaded
    /// Another look after a host object the plan needs was found unloaded: the scopes change at
    /// the next scan. Bounded, for an object that is unloading but still listed.
    llvm::Error rescan();
  };
  /// A root's plan, resolved completely, with the device that links it and its program's key.
  struct PlannedProgram {
    LinkPlan plan;
    backend::Device *device;
    cache::ProgramKey key;
  };
  llvm::Expected<PlannedProgram> planProgram(const ProgramRequest &request);
  /// An image of the plan whose variable another image interposes, with no program holding the
  /// instance its own code is to reach, that devdl can edit so and has not linked alone for the
  /// request yet; nullopt for none.
  std::optional<uint32_t> interposedWithoutInstance(const ProgramRequest &request, const PlannedProgram &planned) const;
  /// The request's use of `program`, found in memory, recorded with references on the plan's
  /// host objects; null: look again.
  llvm::Expected<cache::LinkedProgram *> useProgram(Lock &lock, ProgramRequest &request, PlannedProgram &planned,
                                                    cache::LinkedProgram *program);
  /// The plan's program built once, with the loaded images that import from it, and kept for the
  /// uses it serves; null: look again.
  llvm::Expected<cache::LinkedProgram *> buildProgram(Lock &lock, ProgramRequest &request, PlannedProgram &planned);
  struct BuildJob;
  struct BuildInputs;
  /// What a build needs once the lock is let go, its images held.
  BuildJob prepareBuild(const ProgramRequest &request, PlannedProgram &planned);
  /// Which variables of `plan` a program linked for `device` reaches in the programs that hold
  /// their instances, and which it will hold: into `into` (its inputs' `elsewhere`, its key's).
  void reachInstances(const LinkPlan &plan, const backend::Device *device, BuildInputs &into) const;
  /// The host objects carrying images of `plan` but for `except`'s (loaded while it is).
  std::vector<host::ObjectLoad> hostsOf(std::span<const uint32_t> plan, const host::LoadedBundle *except) const;
  /// The key of the program linked from `plan`, by its images' hashes, and the images whose
  /// variables it links (each has one instance on a device).
  cache::ProgramKey keyOf(const LinkPlan &plan) const;
  /// The variables of image `id` that have one instance on a device: those it exports, and its
  /// statics by the names they are exported under (LoadedImage::statics).
  std::vector<std::string_view> variablesOf(uint32_t id) const;
  /// How messages name image `id`'s variable `name` (of variablesOf): a static by its own name.
  std::string_view variableShown(uint32_t id, std::string_view name) const;
  /// How messages name a program: by its first use's root, else its first image.
  std::string_view labelOf(const cache::LinkedProgram &program) const;
  /// References on host objects, dropped once the lock is let go (Lock::release).
  void releaseLater(std::optional<std::vector<std::shared_ptr<const void>>> &references) {
    if (references)
      for (auto &reference : *references) released_.push_back(std::move(reference));
  }

  // Moved by every change that could alter a lookup's answer. One for every loader of the
  // process: one made where another was destroyed (the tests') may have the same address and
  // handles at the same addresses, never the same generation.
  static inline std::atomic<uint64_t> generation_{1};
  std::mutex mutex_;
  std::atomic<uint64_t> lookupsUnderLock_{0};
  std::vector<std::shared_ptr<const void>> released_;  // to destroy once mutex_ is let go
  char globalScopeTag_ = 0;  // its address is the handle of device_dlopen(NULL)
  ImageTable images_;
  std::vector<uint32_t> undecided_;  // loaded images whose candidacy is Undecided
  std::vector<uint32_t> owning_;     // images whose own program is being linked to hold their interposed variables
  std::vector<uint32_t> unreported_;  // joined the global scope undecided: DEVDL_DEBUG=symbols waits
  Scopes scopes_;
  std::vector<std::unique_ptr<Handle>> handles_;
  // The devices of views by place (backend::Devices keeps them); place 0, the default devices,
  // is null. Never removed: images keep their candidacy and programs by place.
  std::vector<backend::Device *> places_{nullptr};
  std::vector<std::unique_ptr<View>> views_;  // removed with their handles
  // A loaded host object's bundle, by its address in memory.
  struct ProcessBundle {
    host::LoadedBundle found;  // as the scan found it: the object, its exports
    bool global = false;
    bool told = true;  // its exports told whether it is global: else asked again at each scan
    std::vector<uint32_t> images;
    /// The handles of the files its images need (devdl/module needed), referenced while it is
    /// loaded: global while it is, as a host library's DT_NEEDED libraries are.
    std::vector<Handle *> needed;
  };
  std::map<const uint8_t *, ProcessBundle> processBundles_;
  uint64_t scannedGeneration_ = 0;
  bool scanned_ = false;
  bool preloaded_ = false;
  backend::Devices devices_;
  cache::ProgramCache programs_;
  // Builds that failed, by device and key: given again, not built again, until the loader
  // changes (generation_), as the images or their scopes may then make another program.
  struct FailedBuild {
    const backend::Device *device;
    cache::ProgramKey key;
    uint64_t generation;
    KeptError error;
  };
  std::vector<FailedBuild> failedBuilds_;
  const FailedBuild *failedBuild(const backend::Device *device, const cache::ProgramKey &key);
  void rememberFailure(const backend::Device *device, const cache::ProgramKey &key, uint64_t generation,
                       llvm::Error &err);  // `err` of a build prepared at `generation`, copied
  cache::DiskCache &(*const summaries_)();
  llvm::StringSet<> addressNames_;  // the strings device_dladdr handed out: kept for the process
};

}  // namespace devdl
