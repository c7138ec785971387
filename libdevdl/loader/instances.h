// One instance of a loaded image's variables on each device (docs/architecture.md, "Lifetimes"):
// which variables a plan links, and its program's key by them; which of them a program reaches in
// the programs that hold their instances, and which it will hold; and an image whose interposed
// variable no program holds yet, whose own program is linked first to hold it. Internal to
// Programs, which asks it with the loader's mutex held.
#pragma once

#include "cache/program_cache.h"
#include "loader/image_table.h"
#include "resolve/link_plan.h"

#include <llvm/ADT/STLFunctionalExtras.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace devdl {

struct BuildInputs;

class Instances {
 public:
  Instances(const ImageTable &images, const cache::ProgramCache &cache) : images_(images), cache_(cache) {}

  /// Which variables of `plan` a program linked for `device` reaches in the programs that hold
  /// their instances, and which it will hold: into `into` (its inputs' `elsewhere`, its key's).
  void reach(const LinkPlan &plan, const backend::Device *device, BuildInputs &into) const;
  /// An image of the plan whose variable another image interposes, with no program on `device`
  /// holding the instance its own code is to reach, that devdl can edit so and does not
  /// `passOver`; nullopt for none.
  std::optional<uint32_t> unheldInterposed(const LinkPlan &plan, const backend::Device *device,
                                           llvm::function_ref<bool(uint32_t)> passOver) const;
  /// The key of the program linked from `plan`, by its images' hashes, and the images whose
  /// variables it links (each has one instance on a device).
  cache::ProgramKey keyOf(const LinkPlan &plan) const;
  /// The variables of image `id` that have one instance on a device: those it exports, and its
  /// statics by the names they are exported under (LoadedImage::statics).
  std::vector<std::string_view> variablesOf(uint32_t id) const;
  /// How messages name image `id`'s variable `name` (of variablesOf): a static by its own name.
  std::string_view variableShown(uint32_t id, std::string_view name) const;
  /// How messages name a program: by its first use's root, else its first image.
  std::string_view labelOf(const cache::LinkedProgram &program) const;

 private:
  /// Why image `id`'s statics stay its own, which no other program reaches; "" where devdl exports them.
  std::string whyStaticsStay(uint32_t id) const;

  const ImageTable &images_;
  const cache::ProgramCache &cache_;
};

}  // namespace devdl
