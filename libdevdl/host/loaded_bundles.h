// The bundles in the memory of this process, found in the loaded objects' PT_NOTE segments
// (dl_iterate_phdr, in link-map order), and what the host loader says of those objects: whether
// each is in its global scope, and references that keep one loaded.
//
// Nothing here records a dependency of libdevdl on an object: dlsym(RTLD_DEFAULT) would (glibc
// marks the object found NODELETE for libdevdl's sake, and the host's dlclose could never unload
// it), so the global scope is asked through dlsym(dlopen(NULL)), which does not.
#pragma once

#include "support/bytes.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace devdl::host {

/// Which load of a host object: its path and load address, copied, since the loader drops a
/// bundle once the host unloads its object, which may be while the loader's lock is let go.
struct ObjectLoad {
  std::string path;
  uintptr_t base = 0;
  bool operator==(const ObjectLoad &) const = default;
};

/// A bundle in the memory of this process, and the object that carries it.
struct LoadedBundle {
  std::string object;  // the object's path as the dynamic linker reports it ("" = main)
  uintptr_t base = 0;  // its load address: with the path, which load of an object this is
  Bytes bytes;
  /// The object's loaded segments, [begin, end).
  std::vector<std::pair<uintptr_t, uintptr_t>> segments;
  /// Names the object exports (its dynamic symbol table: defined, global or weak, visible,
  /// neither TLS nor IFUNC), the one at the bundle first where it has one; a few at most.
  std::vector<std::string> exports;
  /// Where its images are: the bundle at `bytes`; or, for the two carriers below, in the
  /// object's file, read from there while it is loaded, `bytes` then empty, at the object's
  /// dynamic section (which load this is).
  enum class Carrier : uint8_t {
    Bundle,
    /// DPC++ built the object (it imports __sycl_register_lib): its file's offload tables
    /// (image/sycl_offload_reader.cpp), whose descriptor only the file's symbol table names.
    OffloadTables,
    /// nvcc -rdc=true objects linked with devdl's registration object (it imports
    /// device_dlregister_cuda, include/devdl_cuda.h): the fat binaries of its file's
    /// __nv_relfatbin section.
    CudaObjects,
  };
  Carrier carrier = Carrier::Bundle;
  /// The loaded objects the object needs: its DT_NEEDED libraries, theirs, and so on, breadth
  /// first, each as the host loader matched the name (the first object in link-map order of that
  /// soname, or loaded from that name): with the object itself, the local scope the host loader
  /// resolves its symbols in after the global one when it was opened RTLD_LOCAL.
  std::vector<ObjectLoad> needs = {};
  /// The host loader loaded the object with the program, before main: the executable, an
  /// LD_PRELOAD object, or one they need (DT_NEEDED, transitively). ld.so ends such a program
  /// where an object's symbols do not resolve; a failed dlopen the program sees instead.
  bool withProgram = false;
};

/// Whether the object the host loader reports as `object` may be the one it loaded for `name`: a
/// name with a slash is the path itself; a file name, one it searched for, is the path's last
/// component.
bool loadedFrom(std::string_view name, std::string_view object);

/// Every bundle of every object loaded in this process, and each object whose images are in its
/// file (LoadedBundle::Carrier), in link-map order (the executable, preloaded objects, libraries
/// in load order, then objects opened with dlopen), and the generation (below) of that very list.
struct LoadedObjects {
  std::vector<LoadedBundle> bundles;
  uint64_t generation = 0;
};
LoadedObjects findLoadedBundles();

/// A number that changes whenever the host loader loads or unloads an object (glibc's
/// dlpi_adds + dlpi_subs): a rescan for bundles is needed only when it moved. O(1).
uint64_t loadedObjectsGeneration();

/// Which load of an object holds an address, to tell later whether that very load is still
/// there: asked of glibc's _dl_find_object, which takes no lock (glibc 2.35).
struct LoadMark {
  const void *map = nullptr;    // the object's link map
  const void *start = nullptr;  // where its mapping begins
  bool operator==(const LoadMark &) const = default;
};
/// The load holding `address`; nullopt where no loaded object holds it.
std::optional<LoadMark> loadMarkOf(const void *address);

/// Whether the object carrying `bundle` is in the host's global scope now: the executable, its
/// libraries, LD_PRELOAD objects and objects opened or promoted RTLD_GLOBAL are; an object opened
/// RTLD_LOCAL is not. Asked with the object's own exports, whatever they are named: one found
/// as the object's own by dlsym(dlopen(NULL)) says it is; one found nowhere says it is not.
/// nullopt where no export can tell: the object exports nothing, or only names an object before
/// it in the global scope exports too (a second copy of a library: its bundle's default symbol
/// is named by the bundle's content). Asked again later, it may tell.
std::optional<bool> inGlobalScope(const LoadedBundle &bundle);

/// While one lives, its thread runs a host object's constructor for the host loader (the CUDA
/// runtime's registration, include/devdl_cuda.h): nothing is unloaded meanwhile, and a dlopen,
/// even RTLD_NOLOAD, would run the constructors of objects loaded but not initialized yet, before
/// their turn (glibc initializes what it opens). References taken on that thread hold nothing.
class InConstructor {
 public:
  InConstructor();
  ~InConstructor();
  InConstructor(const InConstructor &) = delete;
  InConstructor &operator=(const InConstructor &) = delete;
  static bool now();
};

/// A reference on a loaded object, as dlopen(RTLD_NOLOAD) takes one: the object stays loaded
/// until the last reference is dropped, whatever the host's dlclose does meanwhile.
class ObjectReference {
 public:
  /// A reference on the object loaded at `base` from `path`; null when it is not loaded (any
  /// more, or another object is at that address). The executable needs none: null. In a
  /// constructor (InConstructor), one that holds nothing.
  static std::shared_ptr<ObjectReference> take(const std::string &path, uintptr_t base);
  ~ObjectReference();
  ObjectReference(const ObjectReference &) = delete;
  ObjectReference &operator=(const ObjectReference &) = delete;

 private:
  explicit ObjectReference(void *handle) : handle_(handle) {}
  void *handle_;  // null: held by the host loader's constructor call (InConstructor)
};

/// A reference on each of `loads` (ObjectReference::take); nullopt where one is not loaded any
/// more.
std::optional<std::vector<std::shared_ptr<const void>>> referenceAll(std::span<const ObjectLoad> loads);

}  // namespace devdl::host
