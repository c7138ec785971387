// The closure of an image's imports: which images a program needs and which definition each
// import binds to. A worklist over the imports, so the cost follows the imports visited, never
// images x symbols.
#pragma once

#include "image/device_image.h"

#include <llvm/ADT/FunctionExtras.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
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
  /// Interposition by symbol, as in ld.so: by position in `images`, the functions and variables
  /// of that image the link must not see, since the plan uses another definition (sorted). A
  /// name the plan binds is the definition it binds to; one nobody in the plan imports is the
  /// first image's that defines it. The backend makes the others local to their image.
  std::vector<std::vector<std::string_view>> interposed;
  /// A name bound to two definitions (importers in different scopes: DEEPBIND): one program has
  /// one of each name, so such a plan cannot be linked.
  struct Conflict {
    std::string_view symbol;
    Binding first, second;
  };
  std::vector<Conflict> conflicts;
  /// Images that joined as the seed's virtual-function sets have them join (not by an import),
  /// with why: "calls set A"; and what a set asked for that cannot be had, in words. Filled by
  /// the planner (resolve/planner.h), which knows the sets and the candidacies.
  struct Joined {
    uint32_t image;
    std::string why;
  };
  std::vector<Joined> joined;
  std::vector<std::string> setProblems;
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
