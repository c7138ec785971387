// The loader: the entry points of the C API over its parts (loader/loader_parts.h lists them).
//
// Here: loader.cpp (the parts made; opening, with loader/opener.h; closing, views, attaching,
// specializing), symbol.cpp
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
// docs/architecture.md ("Threads"). Every member of the parts but those taking a LoaderLock is
// called with it held and calls neither the host loader nor a backend.
#pragma once

#include "loader/loader_parts.h"

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
  using Options = LoaderOptions;
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
  LoaderParts parts_;
  std::atomic<uint64_t> lookupsUnderLock_{0};
  llvm::StringSet<> addressNames_;  // the strings device_dladdr handed out: kept for the process
  /// The programs registerCuda made, by the objects the runtime loaded them for.
  std::vector<std::pair<const devdl_cuda_objects *, cache::LinkedProgram *>> cudaRegistered_;
};

}  // namespace devdl
