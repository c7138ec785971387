// Linked programs in memory, found by what they are made of, and the get-or-link policy behind
// them: a program whose images include all of a plan's serves that plan (the seed's nested key);
// otherwise the binary store's program for the plan, else one linked by the device and stored.
#pragma once

#include "backend/backend.h"
#include "cache/binary_store.h"
#include "resolve/link_plan.h"

#include <llvm/Support/Error.h>

#include <algorithm>
#include <compare>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace devdl::cache {

/// XXH3-128 of an image's bytes (and of the specialization constants set on it): programs are
/// keyed by what they are made of.
struct ContentHash {
  uint64_t low = 0, high = 0;
  auto operator<=>(const ContentHash &) const = default;
};

/// A program linked from a link plan, the images it holds, and the plans it serves. Like a host
/// library its dependents keep loaded, it lives while a plan it serves does, whatever happens to
/// the other images it holds: a plan goes when its root image is unloaded.
struct LinkedProgram {
  /// A root image's plan that this program serves, as it was linked: its images (the root
  /// first) and bindings stay what the program runs, whatever is unloaded since.
  struct Use {
    uint32_t root;
    LinkPlan plan;
    // What keeps the plan's images in memory while it is used (references on host objects).
    std::vector<std::shared_ptr<const void>> pins;
    bool operator==(const Use &other) const { return root == other.root && plan.images == other.plan.images; }
  };
  std::vector<ContentHash> key;  // the hashes of its images, sorted
  std::vector<uint32_t> images;  // the images it was linked from: kept while it lives
  std::vector<Use> uses;
  backend::Device *device;
  // Shared with lookups making a kernel from it with the loader's lock let go: the last of them
  // releases it.
  std::shared_ptr<backend::Program> program;

  bool holds(uint32_t image) const { return std::find(images.begin(), images.end(), image) != images.end(); }
};

/// A program made by ProgramCache::build, and whether a binary store had it: the entry's source
/// ("the disk cache", "the remote store redis://…"), empty where it was linked.
struct Built {
  std::unique_ptr<backend::Program> program;
  std::string source;
  bool fromStore() const { return !source.empty(); }
};

/// Its caller serializes the calls, but for build(), which reads nothing of the cache (only its
/// arguments and the store): the loader builds with its lock let go.
class ProgramCache {
 public:
  /// `store` is asked for on the first build (the disk cache is set up then, not before).
  explicit ProgramCache(BinaryStore &(*store)()) : store_(store) {}
  ProgramCache(const ProgramCache &) = delete;
  ProgramCache &operator=(const ProgramCache &) = delete;

  /// A program on `device` whose images include every image of `key` (sorted), or null.
  LinkedProgram *find(const backend::Device *device, std::span<const ContentHash> key) const;
  /// The first program, in the order they were made, that holds image `id`; or null.
  LinkedProgram *holding(uint32_t id) const;
  /// Whether any program was made for `device`.
  bool anyOn(const backend::Device *device) const;

  /// The program of `inputs` (a plan's images, in plan order; `key` their hashes, sorted): the
  /// binary store's where it has one `device` loads, else linked by `device` and stored. Errors
  /// are the device's (they name the image and symbol); a binary the device refuses is dropped
  /// from the store and the program linked.
  llvm::Expected<Built> build(backend::Device &device, std::span<const ContentHash> key,
                              std::span<const backend::LinkInput> inputs);
  /// Keeps a program made by build() from `images`, for the plans it serves.
  LinkedProgram *add(std::vector<ContentHash> key, std::vector<uint32_t> images, std::vector<LinkedProgram::Use> uses,
                     backend::Device *device, std::shared_ptr<backend::Program> program);
  /// Drops the plans rooted at `roots` (images unloaded) and returns the programs left with
  /// none, which the caller releases with the images they hold. What the dropped plans and
  /// programs kept (their pins, the native programs) goes to `released`, for the caller to let
  /// go when it may call the host loader and the backend.
  std::vector<std::unique_ptr<LinkedProgram>> dropUses(std::span<const uint32_t> roots,
                                                       std::vector<std::shared_ptr<const void>> &released);
  /// Whether `program` is one of this cache's.
  bool contains(const LinkedProgram *program) const;

 private:
  BinaryStore &(*store_)();
  std::vector<std::unique_ptr<LinkedProgram>> programs_;
};

}  // namespace devdl::cache
