// What a name is bound to in a handle's scope, as dlsym(handle) binds it: its images, then the
// images its images depend on, breadth first; in the global scope, the host's objects and the
// handles opened DEVDL_GLOBAL in search order. And the program a name is taken from, linked if
// need be: device_dlsym's, device_dlsyminfo's, device_dlread's and device_dlplan's way in. And
// which image of a handle's scope defines a registered object.
#include "loader/lookups.h"

#include "host/object_registry.h"
#include "support/error.h"

#include <llvm/ADT/STLExtras.h>

#include <algorithm>
#include <cstdio>

namespace devdl {

llvm::Expected<Lookups::Found> Lookups::lookup(LoaderLock &lock, void *pointer, std::string_view name) {
  std::optional<Handles::Target> target = parts_.handles.targetOf(pointer);
  if (!target) return fail(ErrorCode::InvalidArgument, "invalid handle");
  const unsigned place = target->place;
  parts_.candidacies.decide(lock, place);
  // Deciding lets the mutex go: the handle may have been closed meanwhile.
  if (!(target = parts_.handles.targetOf(pointer))) return fail(ErrorCode::InvalidArgument, "invalid handle");
  const Planner planner = parts_.programs.planner(place);
  auto takes = [&](uint32_t id) { return planner.isCandidate(id); };
  const Definition *definition = nullptr;
  const Handle *handle = nullptr;  // null: the global scope
  if (target->handle == parts_.handles.global()) {
    auto findGlobal = [&] { return firstCandidate(parts_.scopes.global().definitions(name), takes); };
    // Objects the host loads later come later in search order and cannot shadow what is found
    // now; only a definition from a host object, which may have been unloaded since, or none at
    // all needs a look at the process first.
    definition = findGlobal();
    if (!definition || images_[definition->image].host) {
      parts_.scan.scan(lock);
      definition = findGlobal();
    }
  } else {
    handle = parts_.handles.find(target->handle);
    definition = firstCandidate(handle->local.index.definitions(name), takes);
    // In a recorded dependency: as one its imports reach.
    if (definition && !llvm::is_contained(handle->images, definition->image))
      return Found{*definition, imageReaching(*handle, definition->image, place), place};
    if (!definition)
      if (std::optional<Found> found = inDependencies(*handle, name, place)) return *found;
  }
  if (!definition) {
    // Defined, but only in images no device here can take: say so rather than "undefined".
    auto all = handle ? handle->local.index.definitions(name) : parts_.scopes.global().definitions(name);
    if (!all.empty()) {
      const LoadedImage &first = images_[all.front().image];
      return fail(ErrorCode::Unsupported, first.label + ": `" + std::string(name) + "` is in a " +
                                              std::string(formatName(first.image.format)) +
                                              " image, which cannot be linked here: " + first.whyNotAt(place));
    }
    return fail(ErrorCode::NotFound, (handle ? handle->path : std::string("the global scope")) +
                                         ": undefined device symbol `" + std::string(name) + "`");
  }
  return Found{*definition, std::nullopt, place};
}

std::optional<Lookups::Found> Lookups::inDependencies(const Handle &handle, std::string_view name, unsigned place) {
  // As glibc's dlsym(handle): after the handle's own scope, what its images depend on, breadth
  // first: the images their imports bind to, as the plans of their programs have them (those
  // stay loaded for the programs), else as they would bind now.
  // A definition the plan makes local (interposed) is not the one its kernels use.
  for (uint32_t root : handle.images) {
    std::optional<LinkPlan> made;
    const LinkPlan &plan = parts_.programs.planOf(root, place, made);
    for (size_t i = 0; i < plan.images.size(); ++i) {
      const uint32_t id = plan.images[i];
      if (llvm::is_contained(handle.local.images, id) || !parts_.programs.planner(place).isCandidate(id)) continue;
      if (std::binary_search(plan.interposed[i].begin(), plan.interposed[i].end(), name)) continue;
      const DeviceImage &image = images_[id].image;
      auto defined =
          llvm::find_if(image.symbols, [&](const Symbol &s) { return s.kind != SymbolKind::Import && s.name == name; });
      if (defined != image.symbols.end()) return Found{{id, defined->kind, linkFamily(image.format)}, root, place};
    }
  }
  return std::nullopt;
}

std::optional<uint32_t> Lookups::imageReaching(const Handle &handle, uint32_t id, unsigned place) {
  // The program of that image holds `id`: the program its kernels use.
  for (uint32_t root : handle.images) {
    std::optional<LinkPlan> made;
    if (llvm::is_contained(parts_.programs.planOf(root, place, made).images, id)) return root;
  }
  return std::nullopt;
}

llvm::Expected<Lookups::Located> Lookups::locate(LoaderLock &lock, void *handlePtr, std::string_view name) {
  auto found = lookup(lock, handlePtr, name);
  if (!found) return found.takeError();
  const Definition definition = found->definition;
  const std::optional<Handles::Target> target = parts_.handles.targetOf(handlePtr);
  const bool inGlobalScope = target && target->handle == parts_.handles.global();
  llvm::Expected<cache::LinkedProgram *> program = nullptr;
  if (found->through) {
    // Found among the handle's dependencies: in the program of the image that reaches it, whose
    // kernels use this very instance.
    program = parts_.programs.programFor(lock, *found->through, found->place);
  } else if (definition.kind != SymbolKind::Kernel) {
    // A variable has one instance on each device, in the first program whose definition it is
    // (not made local there: another image's interposes it), which every other program that
    // uses it reaches. Only with no such program is one linked for the image.
    auto device = parts_.places.deviceAt(images_[definition.image].image, found->place);
    if (device) program = parts_.programs.cache().defining(definition.image, name, *device);
    else llvm::consumeError(device.takeError());  // programFor says why
  }
  if (program && !*program) program = parts_.programs.programFor(lock, definition.image, found->place);
  if (!program) return program.takeError();
  // The program found reaches the variable's instance in the one that holds it.
  if (definition.kind == SymbolKind::Variable && !(*program)->defines(definition.image, name))
    if (cache::LinkedProgram *holder = parts_.programs.cache().defining(definition.image, name, (*program)->device))
      program = holder;
  // The program holds the image: its label is there, whatever was unloaded meanwhile.
  Located located{(*program)->program, definition, images_[definition.image].label, nullptr};
  if (inGlobalScope && images_[definition.image].host)
    located.hostAddress = images_[definition.image].host->bytes.data();
  lock.letGo();
  return located;
}

llvm::Expected<std::pair<std::string, uint32_t>> Lookups::objectIn(
    LoaderLock &lock, void *handlePtr, const void *object, std::string_view kind, std::string_view what,
    llvm::function_ref<bool(const DeviceImage &, std::string_view)> has) {
  char address[32];
  std::snprintf(address, sizeof address, "%p", object);
  const std::optional<host::ObjectRegistry::Entry> entry = host::ObjectRegistry::instance().find(object);
  if (!entry)
    return fail(ErrorCode::NotFound, std::string(what) + ": no host object is registered at " + address +
                                         " (__register_uniquely_identifiable_object, device_dlregister)");
  if (entry->kind != kind)
    return fail(ErrorCode::InvalidArgument, std::string(what) + ": the object at " + address + ", `" + entry->uniqueId +
                                                "`, is a " + entry->kind + ", not a " + std::string(kind));
  const std::optional<Handles::Target> target = parts_.handles.targetOf(handlePtr);
  if (!target) return fail(ErrorCode::InvalidArgument, std::string(what) + ": invalid handle");
  const Handle *handle = target->handle == parts_.handles.global() ? nullptr : parts_.handles.find(target->handle);
  parts_.scan.scan(lock);
  std::vector<uint32_t> scope;
  if (handle) scope = handle->local.images;
  for (uint32_t id : parts_.scopes.globalOrder()) scope.push_back(id);
  for (uint32_t id : scope)
    if (images_.contains(id) && images_[id].loaded && has(images_[id].image, entry->uniqueId))
      return std::pair{entry->uniqueId, id};
  return fail(ErrorCode::NotFound, std::string(what) + ": the " + std::string(kind) + " `" + entry->uniqueId +
                                       "` registered at " + address + " is defined by no image in the scope of " +
                                       (handle ? handle->path : std::string("the global scope")));
}

}  // namespace devdl
