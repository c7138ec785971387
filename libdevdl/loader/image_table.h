// The images the loader knows, by id: where each came from, what it is keyed by, and which
// images import each name (for linking a library with its importers); planning reads them
// (resolve/planner.h).
#pragma once

#include "backend/backend.h"
#include "host/loaded_bundles.h"
#include "cache/program_cache.h"
#include "image/device_image.h"
#include "resolve/planner.h"

#include <llvm/ADT/StringMap.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace devdl {

class Handle;

/// One image known to the loader: what planning knows of it (ScopedImage), and where it came
/// from, what its programs are keyed by, and what keeps it.
struct LoadedImage : ScopedImage {
  unsigned index = 0;       // the image's position in its file
  Handle *owner = nullptr;  // the handle it was opened with; null for the process's own images
  const host::LoadedBundle *host = nullptr;  // the host object that carries it; null for a handle's
  cache::ContentHash bytesHash;  // of the bytes alone
  cache::ContentHash hash;       // of the bytes and the specialization constants set: what programs are keyed by
  backend::SpecConstants specConstants;
  /// The names its statics are exported under (staticExportName, by the bytes' hash), parallel
  /// to image.statics: one instance of each, as of an exported variable.
  std::vector<std::string> statics;
  // In a handle or a loaded host object. Once unloaded, an image is in no scope; a host
  // object's image keeps its strings (DeviceImage::ownStrings), but its bytes may be gone.
  bool loaded = true;
  unsigned holders = 0;  // programs linked from it and builds reading it: freed with the last
  std::vector<Handle *> needs;  // the handles of the files it needs (devdl/module needed), in its order
  /// By place (the default devices, then views' devices: loader.h): the program its kernels are
  /// looked up in there; null, or past the end: link.
  std::vector<cache::LinkedProgram *> programs;
  cache::LinkedProgram *programAt(unsigned place) const { return place < programs.size() ? programs[place] : nullptr; }
  void setProgram(unsigned place, cache::LinkedProgram *program) {
    if (programs.size() <= place) programs.resize(place + 1);
    programs[place] = program;
  }
};

class ImageTable final : public ScopedImages {
 public:
  /// Adds an image, of handle `owner` and resolved in its `local` scope, or of host object `host`;
  /// its id. Ids of freed images are taken again, so that what is sized by the ids stays the size
  /// of what is loaded, however often images come and go.
  uint32_t add(DeviceImage image, const std::string &file, unsigned index, Handle *owner, const LocalScope *local,
               const host::LoadedBundle *host = nullptr);
  /// Marks an image unloaded (its handle closed, its host object gone): it imports nothing any
  /// more, and is freed now unless a program holds it. Reads nothing of the image itself.
  void unload(uint32_t id);
  /// A program holds the image, or lets it go; an unloaded image is freed with its last holder.
  void hold(uint32_t id) { ++images_[id]->holders; }
  void unhold(uint32_t id);
  /// The host objects carrying images `ids` but for `except`'s (loaded while they are).
  std::vector<host::ObjectLoad> hostsOf(std::span<const uint32_t> ids, const host::LoadedBundle *except) const;

  LoadedImage &operator[](uint32_t id) { return *images_[id]; }
  const LoadedImage &operator[](uint32_t id) const { return *images_[id]; }
  bool contains(uint32_t id) const { return id < images_.size() && images_[id]; }
  /// One past the highest id in use.
  uint32_t end() const { return static_cast<uint32_t>(images_.size()); }
  const ScopedImage &scoped(uint32_t id) const override { return *images_[id]; }
  std::span<const DeviceImage *const> pointers() const override { return pointers_; }
  std::span<const uint32_t> importersOf(std::string_view symbol) const override;

 private:
  using Importers = llvm::StringMap<std::vector<uint32_t>>;  // symbol -> loaded images importing it
  void free(uint32_t id);

  std::vector<std::unique_ptr<LoadedImage>> images_;  // by id; null once freed
  std::vector<const DeviceImage *> pointers_;         // images_[id]->image
  std::vector<uint32_t> freeIds_;
  Importers importers_;
  // By id: the entries of importers_ it is in, so that unloading reads no name of the image.
  std::vector<std::vector<Importers::MapEntryTy *>> importEntries_;
};

}  // namespace devdl
