// The scopes imports resolve in, as the host loader's: the global scope in search order, and
// each handle's local scope; DEVDL_DEEPBIND puts the local scope first. Which images may satisfy
// an import (those the device takes: the seed's urDeviceSelectBinary check) is the caller's to
// say, so scopes know no backend.
#pragma once

#include "resolve/symbol_index.h"

#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/STLFunctionalExtras.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace devdl {

/// Whether the definitions of an image (by id) may satisfy imports.
using IsCandidate = llvm::function_ref<bool(uint32_t image)>;

/// A handle's own scope: its images in file order, then their recorded dependencies.
struct LocalScope {
  std::vector<uint32_t> images;
  SymbolIndex index;
  bool deepbind = false;

  void add(const DeviceImage &image, uint32_t id) {
    images.push_back(id);
    index.add(image, id);
  }
  /// Takes images out (a host object's, unloaded). `images[id]` is the image with that id.
  void remove(std::span<const uint32_t> ids, std::span<const DeviceImage *const> all);
};

/// The first of `definitions` whose image is a candidate, of `family` (None: of any family).
const Definition *firstCandidate(std::span<const Definition> definitions, IsCandidate isCandidate,
                                 LinkFamily family = LinkFamily::None);

class Scopes {
 public:
  /// Appends an image to the global scope; false when it is in it already.
  bool join(uint32_t id, const DeviceImage &image);
  /// Moves `ids`, in the global scope, to `position` of its order (where DEVDL_PRELOAD's images
  /// go). `images[id]` is the image with that id.
  void place(std::span<const uint32_t> ids, size_t position, std::span<const DeviceImage *const> images);
  /// Takes images out of the global scope.
  void leave(std::span<const uint32_t> ids, std::span<const DeviceImage *const> images);

  bool isGlobal(uint32_t id) const { return members_.contains(id); }
  /// The global scope's images, in search order.
  std::span<const uint32_t> globalOrder() const { return order_; }
  const SymbolIndex &global() const { return index_; }

  /// The image an import of `symbol`, by an image of `family` whose handle's scope is `local`
  /// (null for the process's own images), binds to: the first candidate definition of the
  /// family in the global scope, then in `local`; `local` first with DEEPBIND.
  std::optional<uint32_t> resolve(std::string_view symbol, LinkFamily family, const LocalScope *local,
                                  IsCandidate isCandidate) const;

 private:
  void rebuild(std::span<const DeviceImage *const> images);

  std::vector<uint32_t> order_;
  llvm::DenseSet<uint32_t> members_;
  SymbolIndex index_;
};

}  // namespace devdl
