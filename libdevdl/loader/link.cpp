// A kernel's program: its image's imports resolved over the scopes into a link plan, the plan's
// program from the program cache (in memory, else the binary store, else linked), linked with
// the loaded images that import from it so that a library's code is built once.
#include "loader/loader.h"
#include "support/debug.h"
#include "support/error.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/Support/FormatVariadic.h>

#include <algorithm>
#include <chrono>
#include <set>

namespace devdl {

bool Loader::deviceTakes(uint32_t id) {
  // Like the seed's urDeviceSelectBinary check: an image the device cannot take (a cubin on
  // OpenCL, a cubin for another GPU generation) never satisfies an import, whatever its names.
  LoadedImage &loaded = images_[id];
  if (loaded.candidacy == LoadedImage::Candidacy::Unknown) {
    backend::Device *device = devices_.forImage(loaded.image);
    loaded.candidacy =
        device && device->accepts(loaded.image) ? LoadedImage::Candidacy::Yes : LoadedImage::Candidacy::No;
  }
  return loaded.candidacy == LoadedImage::Candidacy::Yes;
}

std::optional<uint32_t> Loader::resolve(std::string_view symbol, uint32_t importer) {
  const LoadedImage &image = images_[importer];
  // Only images of the importer's family link with it.
  return scopes_.resolve(symbol, linkFamily(image.image.format), image.owner ? &image.owner->local : nullptr,
                         [&](uint32_t id) { return deviceTakes(id); });
}

LinkPlan Loader::planFor(std::span<const uint32_t> roots) {
  return computeLinkPlan(roots, images_.pointers(),
                         [&](std::string_view symbol, uint32_t importer) { return resolve(symbol, importer); });
}

std::string Loader::whyNotCandidate(const DeviceImage &image) {
  std::string why;
  if (backend::Device *dev = devices_.forImage(image, &why)) dev->accepts(image, &why);
  return why;
}

std::string Loader::whyUnresolved(std::string_view symbol, uint32_t importer) {
  // A definition the importer could link with, in an image the device cannot take (or no
  // device at all): that is the reason to give.
  const LoadedImage &image = images_[importer];
  const LinkFamily family = linkFamily(image.image.format);
  const SymbolIndex *local = image.owner ? &image.owner->local.index : nullptr;
  for (const SymbolIndex *scope : {&scopes_.global(), local}) {
    if (!scope) continue;
    for (const Definition &d : scope->definitions(symbol)) {
      if (d.family != family) continue;
      const LoadedImage &definer = images_[d.image];
      return " (" + definer.label + " defines it, but " + whyNotCandidate(definer.image) + ")";
    }
  }
  return "";
}

llvm::Error Loader::unresolvedError(const LinkPlan &plan) {
  if (plan.unresolved.empty()) return llvm::Error::success();
  std::string message;
  for (const auto &u : plan.unresolved)
    message += (message.empty() ? "" : "\n") + images_[u.importer].label + ": undefined device symbol `" +
               std::string(u.symbol) + "`" + whyUnresolved(u.symbol, u.importer);
  return fail(ErrorCode::Unresolved, message);
}

llvm::Expected<std::vector<std::shared_ptr<const void>>> Loader::pinObjects(uint32_t root,
                                                                           std::span<const uint32_t> plan) {
  std::vector<std::shared_ptr<const void>> pins;
  std::vector<const bundle::LoadedBundle *> pinned;
  const bundle::LoadedBundle *own = images_[root].host;
  for (uint32_t id : plan) {
    const bundle::LoadedBundle *host = images_[id].host;
    if (!host || host == own || llvm::is_contained(pinned, host)) continue;
    if (host->object.empty()) continue;  // the executable stays
    auto reference = bundle::ObjectReference::take(host->object, host->base);
    if (!reference) return fail(ErrorCode::NotFound, images_[id].label + ": the host has unloaded it");
    pins.push_back(std::move(reference));
    pinned.push_back(host);
  }
  return pins;
}

llvm::Error Loader::conflictError(const LinkPlan &plan) {
  if (plan.conflicts.empty()) return llvm::Error::success();
  const LinkPlan::Conflict &c = plan.conflicts.front();
  return fail(ErrorCode::Unsupported,
              "`" + std::string(c.symbol) + "` is bound to two definitions in one program: " +
                  images_[c.first.importer].label + " uses " + images_[c.first.definer].label + "'s, " +
                  images_[c.second.importer].label + " uses " + images_[c.second.definer].label +
                  "'s (a program has one definition of each name)");
}

llvm::Expected<cache::LinkedProgram *> Loader::programFor(uint32_t root) {
  // Like the host loader's bindings, a program stays as it was linked while its images are
  // loaded; a new link sees the process as it is now.
  if (cache::LinkedProgram *program = images_[root].program) return program;
  if (llvm::Error err = scanProcess()) return err;
  if (!images_.contains(root) || !images_[root].loaded)
    return fail(ErrorCode::NotFound, "the image was unloaded with its host object");
  const uint32_t roots[] = {root};
  LinkPlan plan = planFor(roots);
  if (llvm::Error err = unresolvedError(plan)) return err;
  std::string why;
  backend::Device *dev = devices_.forImage(images_[root].image, &why);
  if (!dev) return fail(ErrorCode::Unsupported, images_[root].label + ": " + why);
  // The same code linked for the same device is the same program, whichever handles or
  // files the images came from (the seed's key: the plan's images, sorted). A program that
  // holds all of the plan's images serves it too (the seed's nested key: a library's kernel
  // from the program linked for the application that imports it): its images define each
  // symbol once, so the plan's imports are bound there as the plan binds them.
  // An image whose definitions the plan interposes is linked as another image would be: its
  // hash in the key takes the names made local too.
  auto keyOf = [&](const LinkPlan &what) {
    std::vector<cache::ContentHash> key;
    for (size_t i = 0; i < what.images.size(); ++i) {
      const cache::ContentHash hash = images_[what.images[i]].hash;
      if (what.hidden[i].empty()) {
        key.push_back(hash);
        continue;
      }
      cache::KeyBuilder builder;
      builder.add(hash.low).add(hash.high);
      for (std::string_view name : what.hidden[i]) builder.add(name);
      const cache::Key withHidden = builder.finish();
      key.push_back({withHidden.low, withHidden.high});
    }
    std::sort(key.begin(), key.end());
    return key;
  };
  if (cache::LinkedProgram *program = programs_.find(dev, keyOf(plan))) {
    if (Debug::get().on(Debug::Statistics))
      Debug::get().print("program for " + images_[root].label + ": in memory (" + std::to_string(plan.images.size()) +
                         " of its " + std::to_string(program->key.size()) + " images)");
    cache::LinkedProgram::Use use{root, plan.images, {}};
    if (!llvm::is_contained(program->uses, use)) {
      auto pins = pinObjects(root, plan.images);
      if (!pins) return pins.takeError();
      use.pins = std::move(*pins);
      program->uses.push_back(std::move(use));
    }
    images_[root].program = program;
    return program;
  }
  // Linked with the loaded images that import from it, so that their kernels find this
  // program later rather than build the plan's code again (the seed's double compilation when
  // a library's kernel comes first). Should that link fail, the plan is linked alone.
  std::vector<cache::LinkedProgram::Use> uses{{root, plan.images, {}}};
  std::vector<uint32_t> withImporters{root};
  for (uint32_t importer : importersOf(plan, dev, uses)) withImporters.push_back(importer);
  // The host objects whose images are linked stay loaded from here on: the link reads them.
  for (cache::LinkedProgram::Use &use : uses) {
    auto pins = pinObjects(use.root, use.plan);
    if (!pins) return pins.takeError();
    use.pins = std::move(*pins);
  }
  LinkPlan linked = withImporters.size() == 1 ? plan : planFor(withImporters);
  auto build = [&](const LinkPlan &what) -> llvm::Expected<cache::Built> {
    if (llvm::Error err = conflictError(what)) return err;
    if (Debug::get().on(Debug::Bindings)) {
      for (const Binding &b : what.bindings)
        Debug::get().print("binding `" + std::string(b.symbol) + "`: " + images_[b.importer].label + " -> " +
                           images_[b.definer].label);
      for (size_t i = 0; i < what.images.size(); ++i)
        for (std::string_view name : what.hidden[i])
          Debug::get().print("interposed `" + std::string(name) + "`: made local in " + images_[what.images[i]].label);
    }
    std::vector<backend::LinkInput> inputs;
    for (size_t i = 0; i < what.images.size(); ++i) {
      LoadedImage &image = images_[what.images[i]];
      inputs.push_back({&image.image, image.label, &image.specConstants, what.hidden[i]});
    }
    return programs_.build(*dev, keyOf(what), inputs);
  };
  const auto start = std::chrono::steady_clock::now();
  auto built = build(linked);
  if (!built && withImporters.size() > 1) {
    if (Debug::get().on(Debug::Statistics))
      Debug::get().print("program for " + images_[root].label + ": with its importers it did not link (" +
                         llvm::toString(built.takeError()) + "); linked alone");
    else
      llvm::consumeError(built.takeError());
    uses.resize(1);
    linked = plan;
    built = build(linked);
  }
  if (!built) return built.takeError();
  plan = std::move(linked);
  if (Debug::get().on(Debug::Statistics)) {
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    Debug::get().print("program for " + images_[root].label + ": " + std::to_string(plan.images.size()) +
                       " images, " + std::to_string(plan.bindings.size()) + " bindings, " +
                       (built->fromStore ? "loaded from the disk cache in " : "linked in ") +
                       llvm::formatv("{0:f2}", ms).str() + " ms on " + dev->name() +
                       (built->fromStore ? "" : " (" + std::string(dev->linkMethod()) + ")"));
  }
  cache::LinkedProgram *program = keepProgram(keyOf(plan), plan.images, std::move(uses), dev, std::move(built->program));
  images_[root].program = program;
  return program;
}

std::vector<uint32_t> Loader::importersOf(const LinkPlan &plan, backend::Device *dev,
                                          std::vector<cache::LinkedProgram::Use> &uses) {
  std::vector<uint32_t> found;
  std::set<uint32_t> inPlan(plan.images.begin(), plan.images.end()), seen;
  // A worklist over the exports of what the program holds: the cost follows the imports of
  // those names, never the number of loaded images.
  std::vector<uint32_t> work(plan.images.begin(), plan.images.end());
  while (!work.empty()) {
    const uint32_t id = work.back();
    work.pop_back();
    for (const Symbol &s : images_[id].image.symbols) {
      if (s.kind == SymbolKind::Import) continue;
      for (uint32_t importer : images_.importersOf(s.name)) {
        if (inPlan.count(importer) || !seen.insert(importer).second) continue;
        // Of this device's family, and an image the device takes.
        if (devices_.forImage(images_[importer].image) != dev || !deviceTakes(importer)) continue;
        if (resolve(s.name, importer) != id) continue;  // its import binds elsewhere
        const uint32_t roots[] = {importer};
        LinkPlan own = planFor(roots);
        if (!own.unresolved.empty()) continue;  // LAZY: its missing symbols are its own business
        found.push_back(importer);
        uses.push_back({importer, own.images, {}});
        for (uint32_t member : own.images)
          if (inPlan.insert(member).second) work.push_back(member);
      }
    }
  }
  return found;
}

}  // namespace devdl
