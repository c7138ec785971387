// The symbol index: each exported name to its definitions in search order, so a lookup costs
// one hash probe however many images are loaded.
#pragma once

#include "image/device_image.h"

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringMap.h>

#include <span>
#include <string_view>
#include <vector>

namespace devdl {

/// A definition: the image that holds it (its position in search order) and what it is.
struct Definition {
  uint32_t image;
  SymbolKind kind;
  LinkFamily family;
};

class SymbolIndex {
 public:
  /// Adds the exports (functions, variables, kernels) of `image`; images must be added in
  /// search order, `position` increasing.
  void add(const DeviceImage &image, uint32_t position);

  /// The first definition of `name` that images of `family` can link with, or nullptr.
  const Definition *find(std::string_view name, LinkFamily family) const;

  /// Every definition of `name`, in search order.
  std::span<const Definition> definitions(std::string_view name) const;

 private:
  // StringMap keeps each key beside its value and compares cached hashes first: one cache
  // line per probe in the common case, where a node-based map chases two more pointers.
  llvm::StringMap<llvm::SmallVector<Definition, 1>> map_;
};

/// The outcome of resolving every import of a list of images against all of them, in order
/// (`devdl-pack --check`, an `ldd -r` for device code).
struct LinkCheck {
  struct Unresolved {
    uint32_t image;
    std::string_view symbol;
  };
  struct Duplicate {
    std::string_view symbol;
    uint32_t first;   // the definition that wins
    uint32_t second;  // a later one, ignored
  };
  std::vector<Unresolved> unresolved;
  std::vector<Duplicate> duplicates;  // only between images that link with each other
};

/// Resolves every import of `images` over `images` (first definition wins). Only the images
/// `take` keeps (by position) define or import anything: those the device would take.
LinkCheck checkLinks(std::span<const DeviceImage *const> images,
                     llvm::function_ref<bool(uint32_t image)> take = [](uint32_t) { return true; });

}  // namespace devdl
