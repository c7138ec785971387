// The loader: the entry points of the C API over its parts (docs/architecture.md draws them):
//
//   loader/handles        handles, references and flags, scopes joined, views; an open's record
//   loader/reading        what an open reads: a file and the files its images need
//   loader/process_scan   the host's objects and DEVDL_PRELOAD applied
//   loader/candidacies    whether each image's device takes it
//   loader/programs       a kernel's program: planned, found in memory or built, kept, dropped
//   loader/lookups        what a name is bound to in a handle's scope, and its program
//   loader/places         the devices a lookup links for (views' devices)
//
// Here: loader.cpp (opening, DEVDL_NOW, closing, views, attaching, specializing), symbol.cpp
// (device_dlsym and each thread's answers), queries.cpp (variables, registered objects, plans,
// the image list), cuda_objects.cpp (a host object's nvcc -rdc=true objects linked for the CUDA
// runtime).
//
// Global scope, in search order: the device images carried by the objects of the running
// process that are in the host's global scope (link-map order: executable, LD_PRELOAD, libraries
// in load order, later RTLD_GLOBAL objects), then the images of handles opened DEVDL_GLOBAL, in
// the order they joined. A handle's local scope is its own images, then the images they need,
// breadth first, each once.
//
// One mutex guards the parts' data; how it is let go for work outside, and why, is told once, in
// docs/architecture.md ("Threads"). Every private member but those taking a LoaderLock is called
// with it held and calls neither the host loader nor a backend.
#pragma once

#include "backend/registry.h"
#include "store/disk_cache.h"
#include "loader/candidacies.h"
#include "loader/handles.h"
#include "loader/image_table.h"
#include "loader/loader_lock.h"
#include "loader/lookups.h"
#include "loader/places.h"
#include "loader/process_scan.h"
#include "loader/programs.h"
#include "loader/reading.h"
#include "resolve/scopes.h"

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/ADT/StringSet.h>
#include <llvm/Support/Error.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

struct devdl_addr_info;
struct devdl_cuda_objects;
struct devdl_native;
struct devdl_symbol_info;

namespace devdl {

class Loader {
 public:
  /// What a loader links with: its backends, the binary store behind its programs (asked for at
  /// the first build), and DEVDL_BACKEND's value ("" for every backend).
  struct Options {
    std::span<const backend::BackendEntry> backends;
    store::BinaryStore &(*store)();
    std::string backendChoice;
    /// How long a thread that may hold the host loader's lock waits for another's work it needs
    /// (a device opened, a program built) before it does that work itself: the other thread may
    /// wait for that lock (support/waiting.h). One shown not to hold it waits as long as it takes.
    std::chrono::milliseconds hostLockWait{1000};
    /// The disk cache that keeps image files' summaries (store/image_summary.h); none where null.
    store::DiskCache &(*summaries)() = nullptr;
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
  /// How many symbol() calls took the mutex: a thread's first lookup of a name in a handle, and
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

  /// One image as device_dliterate reports it: copied, so callbacks run without the mutex.
  struct ImageSnapshot {
    std::string file;
    unsigned index;
    std::string format, target;
    bool global;
    size_t symbols;
  };
  std::vector<ImageSnapshot> snapshot();
  /// device_dlregister_cuda: the nvcc -rdc=true objects of the host object holding
  /// `objects.within` linked together against the process's images in its scope, and loaded by
  /// `objects.load` (the CUDA runtime), whose module devdl's lookups then use. `withProgram` says
  /// whether the host loader loaded that object with the program (host::LoadedBundle::withProgram),
  /// which a failure then ends, as ld.so ends it.
  llvm::Error registerCuda(devdl_cuda_objects &objects, bool &withProgram);
  /// device_dlunregister_cuda: the runtime unloaded that program.
  void unregisterCuda(const devdl_cuda_objects &objects);

 private:
  // loader.cpp: opening.
  /// The handle for `identity` (named `name` in errors): the one open, or a new one from what
  /// `read` reads with the mutex let go, with the files its images need (`file`, where it is one:
  /// $ORIGIN is its directory, and its handle keeps it open). A failed open leaves nothing.
  llvm::Expected<Handle *> openIdentified(LoaderLock &lock, const FileIdentity &identity, int flags,
                                          const std::string &name, std::shared_ptr<const RegularFile> file,
                                          llvm::function_ref<llvm::Expected<ImageFile>()> read);
  /// An open handle, referenced once more (linked now with DEVDL_NOW), or as it was.
  llvm::Expected<Handle *> reopen(LoaderLock &lock, Handle &handle, int flags);
  /// Links the programs of the handle's kernels and resolves its other images (DEVDL_NOW), on the
  /// devices of `place`; resolves the images of the handles it holds, which are linked as used.
  llvm::Error linkNow(LoaderLock &lock, Handle &handle, unsigned place = 0);
  /// Success where every import image `id` reaches resolves at `place` (nothing is linked).
  llvm::Error resolvesNow(uint32_t id, unsigned place);

  // queries.cpp.
  /// The registered object at `object` of `kind`, and the first image of the handle's scope
  /// (its images, then the global scope) that `has` it: its unique id and the image's id.
  llvm::Expected<std::pair<std::string, uint32_t>> objectIn(LoaderLock &lock, void *handle, const void *object,
                                                            std::string_view kind, std::string_view what,
                                                            llvm::function_ref<bool(const DeviceImage &,
                                                                                    std::string_view)> has);

  // The parts, in the order each is made from those before it.
  LoaderMutex mutex_;
  std::atomic<uint64_t> lookupsUnderLock_{0};
  ImageTable images_;
  Scopes scopes_;
  backend::Devices devices_;
  Places places_;
  Candidacies candidacies_;
  Programs programs_;
  Handles handles_;
  FileReader reader_;
  ProcessScan scan_;
  Lookups lookups_;
  llvm::StringSet<> addressNames_;  // the strings device_dladdr handed out: kept for the process
  /// The programs registerCuda made, by the objects the runtime loaded them for.
  std::vector<std::pair<const devdl_cuda_objects *, cache::LinkedProgram *>> cudaRegistered_;
};

}  // namespace devdl
