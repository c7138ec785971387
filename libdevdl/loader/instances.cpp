// One instance of a loaded image's variables on each device (docs/architecture.md, "Lifetimes"):
// which variables a plan links, and its program's key by them; which of them a program reaches in
// the programs that hold their instances, and which it will hold; and an image whose interposed
// variable no program holds yet, whose own program is linked first to hold it.
#include "loader/instances.h"

#include "image/instance_cells.h"
#include "loader/build_job.h"

#include <llvm/ADT/STLExtras.h>

#include <algorithm>

namespace devdl {

std::vector<std::string_view> Instances::variablesOf(uint32_t id) const {
  std::vector<std::string_view> variables;
  for (const Symbol &s : images_[id].image.symbols)
    if (s.kind == SymbolKind::Variable) variables.push_back(s.name);
  for (const std::string &name : images_[id].statics) variables.push_back(name);
  return variables;
}

std::string_view Instances::variableShown(uint32_t id, std::string_view name) const {
  const LoadedImage &image = images_[id];
  auto it = llvm::find(image.statics, name);
  return it == image.statics.end() ? name : image.image.statics[static_cast<size_t>(it - image.statics.begin())];
}

std::string_view Instances::labelOf(const cache::LinkedProgram &program) const {
  return images_[program.uses.empty() ? program.images.front() : program.uses.front().root].label;
}

cache::ProgramKey Instances::keyOf(const LinkPlan &plan) const {
  cache::ProgramKey key = cache::ProgramKey::of(plan, [&](uint32_t id) { return images_[id].hash; });
  for (uint32_t id : plan.images)
    if (!variablesOf(id).empty()) key.instances.push_back(id);
  llvm::sort(key.instances);
  return key;
}

void Instances::reach(const LinkPlan &plan, const backend::Device *device, BuildInputs &into) const {
  // Like a host library's data, a loaded image's variables have one instance on a device: in the
  // first program linked with them, which every later program reaches through cells (the
  // definition's, and each importer's in the plan).
  // A variable another image interposes is reached by the image's own code alone, through a cell
  // of its position's; where no program holds it (programFor links the image's own program first
  // where it can be reached), this program keeps the one copy of it (a cubin's).
  into.elsewhere.assign(plan.images.size(), {});
  into.interposedElsewhere.assign(plan.images.size(), {});
  for (size_t i = 0; i < plan.images.size(); ++i) {
    const uint32_t id = plan.images[i];
    for (std::string_view name : variablesOf(id)) {
      const bool interposed = std::binary_search(plan.interposed[i].begin(), plan.interposed[i].end(), name);
      cache::LinkedProgram *lender = cache_.defining(id, name, device);
      if (!lender) {
        // A program keeps the one copy another image's interposition made of it: this would be a second.
        if (const cache::LinkedProgram *copy = cache_.copying(id, name, device); copy && into.secondCopy.empty())
          into.secondCopy = "`" + std::string(name) + "` of " + images_[id].label + " has a copy in the program of " +
                            std::string(labelOf(*copy)) +
                            ", where another image interposes it and its image cannot reach an instance elsewhere "
                            "(a cubin's symbol cannot be a cell): this program would hold a second (an image with "
                            "PTX beside its cubin would do)";
        (interposed ? into.copies : into.instances).emplace_back(id, name);
        continue;
      }
      std::string cell = interposed ? interposedCellName(name, i) : instanceCellName(name);
      into.key.elsewhere.emplace_back(interposed ? cell : std::string(name));
      std::string why = llvm::is_contained(images_[id].statics, name) ? whyStaticsStay(id) : "";
      into.reached.push_back({name, variableShown(id, name), std::move(cell), std::move(why), id, lender,
                              lender->program, images_[id].label, std::string(labelOf(*lender))});
      if (interposed) {
        into.interposedElsewhere[i].push_back(name);
        continue;
      }
      into.elsewhere[i].push_back(name);
      for (const Binding &b : plan.bindings)
        if (b.definer == id && b.symbol == name && b.importer != id)
          into.elsewhere[static_cast<size_t>(llvm::find(plan.images, b.importer) - plan.images.begin())].push_back(name);
    }
  }
  llvm::sort(into.key.elsewhere);
}

std::string Instances::whyStaticsStay(uint32_t id) const {
  // Statics devdl cannot export stay the image's own (withStaticsExported): no program has their
  // address.
  const DeviceImage &image = images_[id].image;
  const ImageFormat format = image.format;
  if ((format == ImageFormat::SpirV || format == ImageFormat::Ptx || format == ImageFormat::Fatbin) &&
      image.unvalidated.empty())
    return "";
  if (format == ImageFormat::Cubin)
    return "a cubin's statics are its machine code's own, which cannot reach an instance elsewhere (an image with "
           "PTX beside its cubins would do)";
  if (format == ImageFormat::SpirV)
    return "devdl's SPIR-V validator could not vouch for the image (" + std::string(image.unvalidated) +
           "), which devdl does not edit, so its statics stay its own";
  return "the statics of an image of format " + std::string(formatName(format)) +
         " stay its own: devdl exports SPIR-V's and PTX's so that other programs reach them";
}

std::optional<uint32_t> Instances::unheldInterposed(const LinkPlan &plan, const backend::Device *device,
                                                    llvm::function_ref<bool(uint32_t)> passOver) const {
  for (size_t i = 0; i < plan.images.size(); ++i) {
    const uint32_t id = plan.images[i];
    const ImageFormat format = images_[id].image.format;
    // Where devdl can edit the image to reach it (a cubin's symbol cannot be renamed), and no
    // program on the way is making it already.
    if (passOver(id) || (format != ImageFormat::SpirV && format != ImageFormat::Ptx && format != ImageFormat::Fatbin))
      continue;
    const std::vector<std::string_view> variables = variablesOf(id);
    for (std::string_view name : plan.interposed[i])
      if (llvm::is_contained(variables, name) && !cache_.defining(id, name, device)) return id;
  }
  return std::nullopt;
}

}  // namespace devdl
