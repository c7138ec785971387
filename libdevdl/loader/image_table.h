// The images the loader knows, by id: where each came from, what it is keyed by, and which
// images import each name (for linking a library with its importers).
#pragma once

#include "backend/backend.h"
#include "bundle/loaded_bundles.h"
#include "cache/program_cache.h"
#include "image/device_image.h"
#include "image/virtual_functions.h"

#include <llvm/ADT/StringMap.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace devdl {

class Handle;

/// One image known to the loader, with where it came from.
struct LoadedImage {
  DeviceImage image;
  std::string label;      // "app.spv: image 0 (spirv)"
  std::string file;       // the file or memory name; "" for the executable
  unsigned index = 0;     // the image's position in it
  Handle *owner = nullptr;  // the handle it was opened with; null for the process's own images
  const bundle::LoadedBundle *host = nullptr;  // the host object that carries it; null for a handle's
  cache::ContentHash bytesHash;  // of the bytes alone
  cache::ContentHash hash;       // of the bytes and the specialization constants set: what programs are keyed by
  backend::SpecConstants specConstants;
  VirtualFunctions vf;  // its virtual-function sets (views into `image`'s strings)
  // Whether the device that links it takes it, asked when it arrived (and again on attach):
  // only such images satisfy imports. With why not, for messages.
  enum class Candidacy : uint8_t { Unknown, Yes, No } candidacy = Candidacy::Unknown;
  std::string whyNot;
  // In a handle or a loaded host object. Once unloaded, an image is in no scope; a host
  // object's image keeps its strings (DeviceImage::ownStrings), but its bytes may be gone.
  bool loaded = true;
  unsigned holders = 0;  // programs linked from it and builds reading it: freed with the last
  cache::LinkedProgram *program = nullptr;  // the program its kernels are looked up in; null: link
};

class ImageTable {
 public:
  /// Adds an image; its id. Ids of freed images are taken again, so that what is sized by the
  /// ids stays the size of what is loaded, however often images come and go.
  uint32_t add(DeviceImage image, const std::string &file, unsigned index, Handle *owner,
               const bundle::LoadedBundle *host = nullptr);
  /// Marks an image unloaded (its handle closed, its host object gone): it imports nothing any
  /// more, and is freed now unless a program holds it. Reads nothing of the image itself.
  void unload(uint32_t id);
  /// A program holds the image, or lets it go; an unloaded image is freed with its last holder.
  void hold(uint32_t id) { ++images_[id]->holders; }
  void release(uint32_t id);

  LoadedImage &operator[](uint32_t id) { return *images_[id]; }
  const LoadedImage &operator[](uint32_t id) const { return *images_[id]; }
  bool contains(uint32_t id) const { return id < images_.size() && images_[id]; }
  /// One past the highest id in use.
  uint32_t end() const { return static_cast<uint32_t>(images_.size()); }
  /// The images by id (null where free), as link plans take them.
  std::span<const DeviceImage *const> pointers() const { return pointers_; }
  /// The loaded images that import `symbol`.
  std::span<const uint32_t> importersOf(std::string_view symbol) const;

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
