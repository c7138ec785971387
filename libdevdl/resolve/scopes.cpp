#include "resolve/scopes.h"

#include <llvm/ADT/STLExtras.h>

#include <algorithm>

namespace devdl {

const Definition *firstCandidate(std::span<const Definition> definitions, IsCandidate isCandidate, LinkFamily family) {
  for (const Definition &d : definitions)
    if ((family == LinkFamily::None || d.family == family) && isCandidate(d.image)) return &d;
  return nullptr;
}

void LocalScope::remove(std::span<const uint32_t> ids, std::span<const DeviceImage *const> all) {
  const size_t before = images.size();
  llvm::erase_if(images, [&](uint32_t id) { return llvm::is_contained(ids, id); });
  if (images.size() == before) return;
  index = SymbolIndex();
  for (uint32_t id : images) index.add(*all[id], id);
}

bool Scopes::join(uint32_t id, const DeviceImage &image) {
  if (!members_.insert(id).second) return false;
  order_.push_back(id);
  index_.add(image, id);
  return true;
}

void Scopes::place(std::span<const uint32_t> ids, size_t position, std::span<const DeviceImage *const> images) {
  llvm::erase_if(order_, [&](uint32_t id) { return llvm::is_contained(ids, id); });
  order_.insert(order_.begin() + static_cast<std::ptrdiff_t>(std::min(position, order_.size())), ids.begin(), ids.end());
  rebuild(images);
}

void Scopes::leave(std::span<const uint32_t> ids, std::span<const DeviceImage *const> images) {
  bool left = false;
  for (uint32_t id : ids) left |= members_.erase(id);
  if (!left) return;
  llvm::erase_if(order_, [&](uint32_t id) { return !members_.contains(id); });
  rebuild(images);
}

void Scopes::rebuild(std::span<const DeviceImage *const> images) {
  index_ = SymbolIndex();
  for (uint32_t id : order_) index_.add(*images[id], id);
}

std::optional<uint32_t> Scopes::resolve(std::string_view symbol, LinkFamily family, const LocalScope *local,
                                        IsCandidate isCandidate) const {
  auto in = [&](const SymbolIndex &index) -> std::optional<uint32_t> {
    if (const Definition *d = firstCandidate(index.definitions(symbol), isCandidate, family)) return d->image;
    return std::nullopt;
  };
  if (local && local->deepbind) {
    if (auto found = in(local->index)) return found;
    return in(index_);
  }
  if (auto found = in(index_)) return found;
  return local ? in(local->index) : std::nullopt;
}

}  // namespace devdl
