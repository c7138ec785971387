// The handles device_dlopen returns, as ld.so keeps its link maps: each opened file's (or
// memory's) images, its references and flags, its local scope (its images, then the images they
// need, breadth first), the handles of what it needs, held while it is open; the global scope they
// join (DEVDL_GLOBAL, through loader/global_scope.h); the views of handles on other devices
// (device_dlview). What an open adds is recorded, so that a failed open takes back exactly that
// (Handles::Open).
#pragma once

#include "loader/candidacies.h"
#include "loader/global_scope.h"
#include "loader/image_table.h"
#include "loader/programs.h"
#include "loader/reading.h"
#include "resolve/scopes.h"
#include "support/regular_file.h"

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace devdl {

class Handle {
 public:
  std::string path;  // the file, or the name given with the memory
  FileIdentity identity{};
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
  unsigned place;  // its device's place (Places)
};

/// What one open added: a failed open takes back exactly that (Handles::Open).
struct OpenRecord {
  Handle *referenced = nullptr;    // the handle it returns, given one more reference
  std::vector<Handle *> added;     // the handles it made, in the order it made them
  std::vector<Handle *> promoted;  // those it made global (DEVDL_GLOBAL), new or open before
};

class Handles {
 public:
  Handles(ImageTable &images, Scopes &scopes, GlobalScope &globalScope, Candidacies &candidacies, Programs &programs)
      : images_(images), scopes_(scopes), globalScope_(globalScope), candidacies_(candidacies), programs_(programs) {}

  /// The handle of device_dlopen(NULL): the global scope's.
  Handle *global() { return reinterpret_cast<Handle *>(&globalScopeTag_); }
  Handle *find(const void *pointer) const;
  Handle *find(const FileIdentity &identity) const;
  /// What a pointer the API was given names: a handle (or the global scope's) on the default
  /// devices (place 0), or a view's handle on its place; nullopt for neither.
  struct Target {
    void *handle;
    unsigned place;
  };
  std::optional<Target> targetOf(const void *pointer) const;
  /// The view of `handle` at `place`; null where there is none yet (addView).
  View *viewOf(const void *handle, unsigned place) const;
  View *addView(void *handle, unsigned place);
  const std::vector<std::unique_ptr<Handle>> &all() const { return handles_; }
  std::vector<FileIdentity> identities() const;

  /// The handles of the files an open read (FileReader::readNeeded): those open, and new ones for
  /// the others, their local scopes made, into `record`; the first's, or look again where one
  /// open before is gone meanwhile. With DEVDL_GLOBAL the new ones join the global scope. Fails
  /// naming a missing dependency, leaving in `record` what it added.
  llvm::Expected<Outcome<Handle *>> add(std::vector<OpenedFile> &files, int flags, OpenRecord &record);
  /// One more reference of an open handle, in `record`.
  void reference(Handle &handle, OpenRecord &record);
  /// The handle, and those it holds, join the global scope (DEVDL_GLOBAL), as dlopen's
  /// RTLD_GLOBAL makes an object and its dependencies global: into `record`, those that joined now.
  void makeGlobal(Handle &handle, OpenRecord &record);
  /// One open as a transaction: what it adds (add, reference and makeGlobal, into its record) is
  /// taken back as it ends unless kept, as if it had not been (revert): a failed open leaves
  /// nothing behind, as glibc's dlopen does, however it fails.
  class Open {
   public:
    explicit Open(Handles &handles) : handles_(&handles) {}
    Open(const Open &) = delete;
    Open &operator=(const Open &) = delete;
    ~Open() {
      if (handles_) handles_->revert(record_);
    }
    OpenRecord &record() { return record_; }
    /// The open stands: what it added stays.
    void keep() { handles_ = nullptr; }

   private:
    Handles *handles_;
    OpenRecord record_;
  };
  /// Drops one reference of the handle; at zero, unloads it, and drops its references of the
  /// handles it holds.
  void dropReference(Handle &handle);

  /// Image ids unloaded: out of every scope at once, their plans dropped, and the programs left
  /// with none released, with the images only they held.
  void dropImages(std::span<const uint32_t> ids);

 private:
  /// Adds what the handle's images need to its local scope, breadth first: the images of the
  /// files they need (LoadedImage::needs), and those of the modules they depend on; references
  /// their handles but `unheld`. Fails naming a module no loaded image is.
  llvm::Error addDependencies(Handle &handle, std::span<Handle *const> unheld);
  /// The loaded image whose module id is `id`: the handle's own first, then the global scope's
  /// in search order, then any other.
  std::optional<uint32_t> findModule(std::string_view id, const Handle &handle) const;
  /// Unloads a handle no reference holds.
  void unload(Handle &handle);
  /// Takes back what an open added (Open): the handles it made global leave the global scope,
  /// its reference is dropped, the handles it made and nothing else holds are unloaded.
  void revert(const OpenRecord &record);

  ImageTable &images_;
  Scopes &scopes_;
  GlobalScope &globalScope_;
  Candidacies &candidacies_;
  Programs &programs_;
  std::vector<std::unique_ptr<Handle>> handles_;
  std::vector<std::unique_ptr<View>> views_;  // removed with their handles
  char globalScopeTag_ = 0;                   // its address is the handle of device_dlopen(NULL)
};

}  // namespace devdl
