#include "loader/image_table.h"

#include "support/debug.h"
#include "support/xxh3.h"

#include <llvm/ADT/STLExtras.h>

namespace devdl {

uint32_t ImageTable::add(DeviceImage image, const std::string &file, unsigned index, Handle *owner) {
  std::string label = (file.empty() ? std::string("(main program)") : file) + ": " + image.label(index);
  const xxh3::Hash128 xxh = xxh3::hash128(image.bytes.data(), image.bytes.size());
  const cache::ContentHash hash{xxh.low, xxh.high};
  uint32_t id = static_cast<uint32_t>(images_.size());
  if (!freeIds_.empty()) {
    id = freeIds_.back();
    freeIds_.pop_back();
  } else {
    images_.emplace_back();
    pointers_.push_back(nullptr);
  }
  if (Debug::get().on(Debug::Libs))
    Debug::get().print("loaded " + label + " (" + std::to_string(image.symbols.size()) + " symbols, id " +
                       std::to_string(id) + ")");
  images_[id] = std::make_unique<LoadedImage>(
      LoadedImage{std::move(image), std::move(label), file, index, owner, hash, hash, {}});
  pointers_[id] = &images_[id]->image;
  for (const Symbol &s : images_[id]->image.symbols)
    if (s.kind == SymbolKind::Import) importers_[llvm::StringRef(s.name.data(), s.name.size())].push_back(id);
  return id;
}

void ImageTable::remove(uint32_t id) {
  for (const Symbol &s : images_[id]->image.symbols) {
    if (s.kind != SymbolKind::Import) continue;
    auto it = importers_.find(llvm::StringRef(s.name.data(), s.name.size()));
    if (it == importers_.end()) continue;
    llvm::erase_value(it->second, id);
    if (it->second.empty()) importers_.erase(it);
  }
  if (Debug::get().on(Debug::Libs)) Debug::get().print("unloaded " + images_[id]->label);
  images_[id].reset();
  pointers_[id] = nullptr;
  freeIds_.push_back(id);
}

std::span<const uint32_t> ImageTable::importersOf(std::string_view symbol) const {
  auto it = importers_.find(llvm::StringRef(symbol.data(), symbol.size()));
  if (it == importers_.end()) return {};
  return it->second;
}

}  // namespace devdl
