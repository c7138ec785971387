// The closure of an image's imports: which images a program needs and which definition each
// import binds to. A worklist over the imports, so the cost follows the imports visited, never
// images x symbols.
#pragma once

#include "image/device_image.h"

#include <llvm/ADT/FunctionExtras.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace devdl {

/// An import and the image that defines it.
struct Binding {
  std::string_view symbol;
  uint32_t importer;
  uint32_t definer;
};

/// What a program is linked from: `images` (ids, the roots first, then each image in the order
/// its first use was found) and the bindings that pulled them in.
struct LinkPlan {
  std::vector<uint32_t> images;
  std::vector<Binding> bindings;
  /// Imports nothing in scope defines, in the order met.
  struct Unresolved {
    std::string_view symbol;
    uint32_t importer;
  };
  std::vector<Unresolved> unresolved;
};

/// Looks up the definition an import of `importer` binds to (its scopes, in its order): the
/// defining image's id, or nullopt.
using Resolver = llvm::function_ref<std::optional<uint32_t>(std::string_view symbol, uint32_t importer)>;

/// Follows the imports of `roots` and of every image they pull in. `images[id]` is the image
/// with that id. Each image is visited once, so cycles end; an image defining its own import
/// binds to itself only if the resolver says so.
LinkPlan computeLinkPlan(std::span<const uint32_t> roots, std::span<const DeviceImage *const> images,
                         Resolver resolve);

}  // namespace devdl
