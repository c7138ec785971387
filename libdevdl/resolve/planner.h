// The policy that makes every link plan: a kernel image's imports resolved over the scopes, only
// to images the device takes (the seed's urDeviceSelectBinary check), with the images of the
// virtual-function sets they call or create (seed 003); the loaded images that import from a plan
// (linked with it so that a library's code is built once); and the errors a plan that cannot be
// linked gives. It reads the loader's images through ScopedImages and changes nothing.
#pragma once

#include "image/device_image.h"
#include "image/virtual_functions.h"
#include "resolve/link_plan.h"
#include "resolve/scopes.h"

#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/Support/Error.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace devdl {

/// Whether the device that links an image takes it: decided as the image arrives, or Undecided
/// where deciding would have opened a device (the loader decides before anything resolves).
/// Only Taken images satisfy imports.
enum class Candidacy : uint8_t { Undecided, Taken, Refused };

/// Whether one device takes an image, and why not (for messages).
struct Acceptance {
  Candidacy candidacy = Candidacy::Undecided;
  std::string whyNot;
};

/// What planning knows of an image the loader holds.
struct ScopedImage {
  DeviceImage image;
  std::string label;  // "app.spv: image 0 (spirv)"
  std::string file;   // the file or memory name; "" for the executable
  const LocalScope *local = nullptr;  // its handle's scope; null for the process's own images
  VirtualFunctions vf;                // its virtual-function sets (views into `image`'s strings)
  Acceptance acceptance;  // by the device that links it by default
  /// At each other place (place p at p - 1): by that place's device where its backend links the
  /// image's family, else as by the default device; decided when a lookup there first needs it.
  /// Past its end, or Undecided: not a candidate there yet.
  std::vector<Acceptance> elsewhere;
  /// Whether place `place`'s device takes it (0: the default device).
  Candidacy candidacyAt(unsigned place) const {
    return place == 0                 ? acceptance.candidacy
           : place <= elsewhere.size() ? elsewhere[place - 1].candidacy
                                       : Candidacy::Undecided;
  }
  const std::string &whyNotAt(unsigned place) const {
    return place == 0 || place > elsewhere.size() ? acceptance.whyNot : elsewhere[place - 1].whyNot;
  }
};

/// The images planning reads, by id: the loader's image table.
class ScopedImages {
 public:
  virtual const ScopedImage &scoped(uint32_t id) const = 0;
  /// The images by id (null where free), as computeLinkPlan takes them.
  virtual std::span<const DeviceImage *const> pointers() const = 0;
  /// The loaded images that import `symbol`.
  virtual std::span<const uint32_t> importersOf(std::string_view symbol) const = 0;

 protected:
  ~ScopedImages() = default;
};

/// Plans for the devices of one place: the default devices (place 0), or the devices of another
/// (a view's: device_dlview), whose candidacy each image keeps apart (ScopedImage::elsewhere).
class Planner {
 public:
  Planner(const ScopedImages &images, const Scopes &scopes, unsigned place = 0)
      : images_(images), scopes_(scopes), place_(place) {}

  bool isCandidate(uint32_t id) const { return images_.scoped(id).candidacyAt(place_) == Candidacy::Taken; }
  /// The definition an import of `importer` binds to: of its family, in its scopes, a candidate;
  /// an image of a virtual-function set only where `pulled` has it.
  std::optional<uint32_t> bind(std::string_view symbol, uint32_t importer, const llvm::DenseSet<uint32_t> &pulled) const;
  /// The images `roots` need: their imports' closure, and the images of the virtual-function sets
  /// its images call or create, found in the first root's scope.
  LinkPlan plan(std::span<const uint32_t> roots) const;

  /// A loaded image that imports from a plan, and its own plan.
  struct Importer {
    uint32_t root;
    LinkPlan plan;
  };
  /// The loaded images that import, directly or through others, from `plan`'s images, bind to
  /// them, are linked by the same device (`sameDevice`) and resolve completely, in the order
  /// found: linked with the plan, a library's code is built once whichever kernel comes first.
  /// The cost follows the imports of the plan's exports, never the number of loaded images.
  std::vector<Importer> importersOf(const LinkPlan &plan, llvm::function_ref<bool(uint32_t)> sameDevice) const;

  /// The plan's unresolved imports and set problems as one error naming each symbol and image
  /// (and why a definition in scope does not serve), the first kUnresolvedShown symbols and how
  /// many more; success when none.
  llvm::Error unresolvedError(const LinkPlan &plan) const;
  static constexpr size_t kUnresolvedShown = 20;
  /// A name the plan binds to two definitions, as an error naming both; success when none.
  llvm::Error conflictError(const LinkPlan &plan) const;
  /// The plan as device_dlplan shows it: one line for each binding, unresolved import, image a
  /// set pulled in, and problem.
  std::string text(const LinkPlan &plan) const;
  /// " (lib.bc: image 0 (spir-bc) defines it, but ...)" for an import that a definition the
  /// device cannot take would have resolved (a weak one left to the driver too); "" otherwise.
  std::string whyUnresolved(std::string_view symbol, uint32_t importer) const;

 private:
  const ScopedImage &at(uint32_t id) const { return images_.scoped(id); }
  /// Adds to `into` the images of the sets `image` calls or creates that are not in `pulled`.
  void pullSets(uint32_t image, const llvm::StringMap<std::vector<uint32_t>> &members,
                llvm::DenseSet<uint32_t> &pulled, std::vector<uint32_t> &into, LinkPlan &plan) const;
  const ScopedImages &images_;
  const Scopes &scopes_;
  unsigned place_;
};

}  // namespace devdl
