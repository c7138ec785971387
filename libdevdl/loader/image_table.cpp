#include "loader/image_table.h"

#include "image/instance_cells.h"
#include "support/debug.h"
#include "support/xxh3.h"

#include <llvm/ADT/STLExtras.h>

namespace devdl {

uint32_t ImageTable::add(DeviceImage image, const std::string &file, unsigned index, Handle *owner,
                         const LocalScope *local, const host::LoadedBundle *host) {
  std::string label = (file.empty() ? std::string("(main program)") : file) + ": " + image.label(index);
  // An image from its file's summary has the hash of the bytes it will be read with.
  const xxh3::Hash128 xxh = image.unread ? xxh3::Hash128{image.unread->hashLow, image.unread->hashHigh}
                                         : xxh3::hash128(image.bytes.data(), image.bytes.size());
  const cache::ContentHash hash{xxh.low, xxh.high};
  uint32_t id = static_cast<uint32_t>(images_.size());
  if (!freeIds_.empty()) {
    id = freeIds_.back();
    freeIds_.pop_back();
  } else {
    images_.emplace_back();
    pointers_.push_back(nullptr);
    importEntries_.emplace_back();
  }
  if (Debug::get().on(Debug::Libs))
    Debug::get().print("loaded " + label + " (" + std::to_string(image.symbols.size()) + " symbols, id " +
                       std::to_string(id) + (image.unread ? ", from the file's summary: read when linked" : "") + ")");
  auto loaded = std::make_unique<LoadedImage>();
  loaded->image = std::move(image);
  loaded->label = std::move(label);
  loaded->file = file;
  loaded->index = index;
  loaded->owner = owner;
  loaded->local = local;
  loaded->host = host;
  loaded->bytesHash = loaded->hash = hash;
  for (std::string_view name : loaded->image.statics) loaded->statics.push_back(staticExportName(name, hash.low));
  loaded->vf = virtualFunctionsOf(loaded->image);
  images_[id] = std::move(loaded);
  pointers_[id] = &images_[id]->image;
  for (const Symbol &s : images_[id]->image.symbols) {
    if (s.kind != SymbolKind::Import) continue;
    Importers::MapEntryTy &entry = *importers_.try_emplace(llvm::StringRef(s.name.data(), s.name.size())).first;
    if (llvm::is_contained(importEntries_[id], &entry)) continue;  // imported twice
    entry.getValue().push_back(id);
    importEntries_[id].push_back(&entry);
  }
  return id;
}

void ImageTable::unload(uint32_t id) {
  LoadedImage &image = *images_[id];
  image.loaded = false;
  image.owner = nullptr;
  image.local = nullptr;
  image.host = nullptr;
  image.programs.clear();
  for (Importers::MapEntryTy *entry : importEntries_[id]) {
    llvm::erase_value(entry->getValue(), id);
    if (entry->getValue().empty()) importers_.erase(importers_.find(entry->getKey()));
  }
  importEntries_[id].clear();
  if (Debug::get().on(Debug::Libs)) Debug::get().print("unloaded " + image.label);
  if (image.holders == 0) free(id);
}

void ImageTable::unhold(uint32_t id) {
  LoadedImage &image = *images_[id];
  if (--image.holders == 0 && !image.loaded) free(id);
}

void ImageTable::free(uint32_t id) {
  images_[id].reset();
  pointers_[id] = nullptr;
  freeIds_.push_back(id);
}

std::vector<host::ObjectLoad> ImageTable::hostsOf(std::span<const uint32_t> ids,
                                                   const host::LoadedBundle *except) const {
  std::vector<host::ObjectLoad> hosts;
  for (uint32_t id : ids) {
    const host::LoadedBundle *host = images_[id]->host;
    // The executable is never unloaded.
    if (!host || host == except || host->object.empty()) continue;
    host::ObjectLoad object{host->object, host->base};
    if (!llvm::is_contained(hosts, object)) hosts.push_back(std::move(object));
  }
  return hosts;
}

std::span<const uint32_t> ImageTable::importersOf(std::string_view symbol) const {
  auto it = importers_.find(llvm::StringRef(symbol.data(), symbol.size()));
  if (it == importers_.end()) return {};
  return it->second;
}

}  // namespace devdl
