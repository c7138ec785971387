#include "resolve/symbol_index.h"

namespace devdl {

void SymbolIndex::add(const DeviceImage &image, uint32_t position) {
  const LinkFamily family = linkFamily(image.format);
  for (const Symbol &s : image.symbols)
    if (s.kind != SymbolKind::Import) map_[llvm::StringRef(s.name.data(), s.name.size())].push_back({position, s.kind, family});
}

const Definition *SymbolIndex::find(std::string_view name, LinkFamily family) const {
  auto it = map_.find(llvm::StringRef(name.data(), name.size()));
  if (it == map_.end()) return nullptr;
  for (const Definition &d : it->getValue())
    if (d.family == family) return &d;
  return nullptr;
}

std::span<const Definition> SymbolIndex::definitions(std::string_view name) const {
  auto it = map_.find(llvm::StringRef(name.data(), name.size()));
  if (it == map_.end()) return {};
  return {it->getValue().data(), it->getValue().size()};
}

LinkCheck checkLinks(std::span<const DeviceImage *const> images, llvm::function_ref<bool(uint32_t image)> take) {
  SymbolIndex index;
  for (uint32_t i = 0; i < images.size(); ++i)
    if (take(i)) index.add(*images[i], i);

  LinkCheck check;
  for (uint32_t i = 0; i < images.size(); ++i) {
    if (!take(i)) continue;
    const LinkFamily family = linkFamily(images[i]->format);
    for (const Symbol &s : images[i]->symbols) {
      if (s.kind == SymbolKind::Import) {
        if (!s.weak && !index.find(s.name, family)) check.unresolved.push_back({i, s.name});
        continue;
      }
      // Report each later definition once, from the image that holds it.
      const Definition *first = index.find(s.name, family);
      if (first && first->image != i && s.kind != SymbolKind::Kernel)
        check.duplicates.push_back({s.name, first->image, i});
    }
  }
  return check;
}

}  // namespace devdl
