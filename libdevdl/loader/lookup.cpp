// What a name is bound to in a handle's scope, and device_dlsym: the lookups a thread made
// before answered without the mutex (Remembered), the others resolved under it and their program
// linked if need be.
#include "host/loaded_bundles.h"
#include "loader/loader.h"
#include "support/error.h"

#include <llvm/ADT/STLExtras.h>

#include <algorithm>
#include <functional>

namespace devdl {

namespace {

// The answers device_dlsym gave this thread, by handle and name: given again without the loader's
// lock while the generation they were found in is the loader's (and, for an image of a host
// object found through the global scope, while that object is loaded where it was). All of them
// go when the generation moves, and past kMostRemembered, so that a thread's memory stays
// bounded: a miss only costs the mutex. Open addressing over a power of two, at most half full: a
// lookup is a hash and, mostly, one comparison.
class Remembered {
 public:
  struct Answer {
    void *address;
    const void *hostAddress;  // in the host object whose image defines it; null for a handle's image
    host::LoadMark hostLoad;
  };
  static constexpr size_t kMostRemembered = 8192;

  const Answer *find(const Loader *loader, uint64_t now, const void *handle, std::string_view name) {
    if (loader != loader_ || now != generation_) {
      forget();
      loader_ = loader;
      generation_ = now;
      return nullptr;
    }
    if (count_ == 0) return nullptr;
    const size_t mask = slots_.size() - 1;
    for (size_t i = hashOf(handle, name) & mask;; i = (i + 1) & mask) {
      const Slot &slot = slots_[i];
      if (!slot.used) return nullptr;
      if (slot.handle == handle && slot.name == name) return &slot.answer;
    }
  }
  /// Remembers an answer found in generation `now` (ignored if it is not find's).
  void add(const Loader *loader, uint64_t now, const void *handle, std::string_view name, Answer answer) {
    if (loader != loader_ || now != generation_) return;
    if (count_ >= kMostRemembered) forget();
    if (2 * (count_ + 1) > slots_.size()) grow();
    place(handle, name, answer);
  }

 private:
  struct Slot {
    bool used = false;
    const void *handle = nullptr;
    std::string name;
    Answer answer{};
  };
  static size_t hashOf(const void *handle, std::string_view name) {
    return std::hash<std::string_view>{}(name) ^ (reinterpret_cast<uintptr_t>(handle) >> 4);
  }
  void place(const void *handle, std::string_view name, const Answer &answer) {
    const size_t mask = slots_.size() - 1;
    size_t i = hashOf(handle, name) & mask;
    while (slots_[i].used && !(slots_[i].handle == handle && slots_[i].name == name)) i = (i + 1) & mask;
    Slot &slot = slots_[i];
    if (!slot.used) {
      slot.used = true;
      slot.handle = handle;
      slot.name.assign(name);
      ++count_;
    }
    slot.answer = answer;
  }
  void grow() {
    std::vector<Slot> old = std::exchange(slots_, std::vector<Slot>(std::max<size_t>(64, 2 * slots_.size())));
    count_ = 0;
    for (Slot &slot : old)
      if (slot.used) place(slot.handle, slot.name, slot.answer);
  }
  void forget() {
    if (count_ == 0) return;
    for (Slot &slot : slots_) slot.used = false;
    count_ = 0;
  }

  const Loader *loader_ = nullptr;
  uint64_t generation_ = 0;
  std::vector<Slot> slots_;
  size_t count_ = 0;
};
thread_local Remembered remembered;
}  // namespace

llvm::Expected<Loader::Found> Loader::lookup(LoaderLock &lock, void *pointer, std::string_view name) {
  std::optional<Handles::Target> target = handles_.targetOf(pointer);
  if (!target) return fail(ErrorCode::InvalidArgument, "invalid handle");
  const unsigned place = target->place;
  candidacies_.decide(lock, place);
  // Deciding lets the mutex go: the handle may have been closed meanwhile.
  if (!(target = handles_.targetOf(pointer))) return fail(ErrorCode::InvalidArgument, "invalid handle");
  const Planner planner = programs_.planner(place);
  auto takes = [&](uint32_t id) { return planner.isCandidate(id); };
  const Definition *definition = nullptr;
  const Handle *handle = nullptr;  // null: the global scope
  if (target->handle == handles_.global()) {
    auto findGlobal = [&] { return firstCandidate(scopes_.global().definitions(name), takes); };
    // Objects the host loads later come later in search order and cannot shadow what is found
    // now; only a definition from a host object, which may have been unloaded since, or none at
    // all needs a look at the process first.
    definition = findGlobal();
    if (!definition || images_[definition->image].host) {
      scan_.scan(lock);
      definition = findGlobal();
    }
  } else {
    handle = handles_.find(target->handle);
    definition = firstCandidate(handle->local.index.definitions(name), takes);
    // In a recorded dependency: as one its imports reach.
    if (definition && !llvm::is_contained(handle->images, definition->image))
      return Found{*definition, imageReaching(*handle, definition->image, place), place};
    if (!definition)
      if (std::optional<Found> found = inDependencies(*handle, name, place)) return *found;
  }
  if (!definition) {
    // Defined, but only in images no device here can take: say so rather than "undefined".
    auto all = handle ? handle->local.index.definitions(name) : scopes_.global().definitions(name);
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

std::optional<Loader::Found> Loader::inDependencies(const Handle &handle, std::string_view name, unsigned place) {
  // As glibc's dlsym(handle): after the handle's own scope, what its images depend on, breadth
  // first: the images their imports bind to, as the plans of their programs have them (those
  // stay loaded for the programs), else as they would bind now.
  // A definition the plan makes local (interposed) is not the one its kernels use.
  for (uint32_t root : handle.images) {
    std::optional<LinkPlan> made;
    const LinkPlan &plan = programs_.planOf(root, place, made);
    for (size_t i = 0; i < plan.images.size(); ++i) {
      const uint32_t id = plan.images[i];
      if (llvm::is_contained(handle.local.images, id) || !programs_.planner(place).isCandidate(id)) continue;
      if (std::binary_search(plan.interposed[i].begin(), plan.interposed[i].end(), name)) continue;
      const DeviceImage &image = images_[id].image;
      auto defined =
          llvm::find_if(image.symbols, [&](const Symbol &s) { return s.kind != SymbolKind::Import && s.name == name; });
      if (defined != image.symbols.end()) return Found{{id, defined->kind, linkFamily(image.format)}, root, place};
    }
  }
  return std::nullopt;
}

std::optional<uint32_t> Loader::imageReaching(const Handle &handle, uint32_t id, unsigned place) {
  // The program of that image holds `id`: the program its kernels use.
  for (uint32_t root : handle.images) {
    std::optional<LinkPlan> made;
    if (llvm::is_contained(programs_.planOf(root, place, made).images, id)) return root;
  }
  return std::nullopt;
}

llvm::Expected<void *> Loader::symbol(void *handlePtr, std::string_view name) {
  // What this thread found before, while nothing changed: no lock at all.
  const uint64_t now = Generation::now();
  if (const Remembered::Answer *answer = remembered.find(this, now, handlePtr, name))
    if (!answer->hostAddress || host::loadMarkOf(answer->hostAddress) == answer->hostLoad) return answer->address;

  LoaderLock lock(mutex_);
  lookupsUnderLock_.fetch_add(1, std::memory_order_relaxed);
  auto located = locate(lock, handlePtr, name);
  if (!located) return located.takeError();
  // The native object is made by the backend with the mutex let go.
  const Definition &definition = located->definition;
  auto address = [&]() -> llvm::Expected<void *> {
    if (definition.kind == SymbolKind::Kernel) return located->program->kernel(name);
    if (definition.kind != SymbolKind::Variable) return located->program->function(name);
    auto extent = located->program->variable(name);
    if (!extent) return extent.takeError();
    return extent->address;
  }();
  if (!address) return inImage(address.takeError(), located->label);
  // A host object's image answers while that load of the object is there: objects loaded later
  // come after it in the global scope, and one unloaded since is rescanned.
  std::optional<host::LoadMark> hostLoad;
  if (located->hostAddress && !(hostLoad = host::loadMarkOf(located->hostAddress))) return *address;
  remembered.add(this, now, handlePtr, name, {*address, located->hostAddress, hostLoad.value_or(host::LoadMark{})});
  return *address;
}

llvm::Expected<Loader::Located> Loader::locate(LoaderLock &lock, void *handlePtr, std::string_view name) {
  auto found = lookup(lock, handlePtr, name);
  if (!found) return found.takeError();
  const Definition definition = found->definition;
  const std::optional<Handles::Target> target = handles_.targetOf(handlePtr);
  const bool inGlobalScope = target && target->handle == handles_.global();
  llvm::Expected<cache::LinkedProgram *> program = nullptr;
  if (found->through) {
    // Found among the handle's dependencies: in the program of the image that reaches it, whose
    // kernels use this very instance.
    program = programs_.programFor(lock, *found->through, found->place);
  } else if (definition.kind != SymbolKind::Kernel) {
    // A variable has one instance on each device, in the first program whose definition it is
    // (not made local there: another image's interposes it), which every other program that
    // uses it reaches. Only with no such program is one linked for the image.
    auto device = places_.deviceAt(images_[definition.image].image, found->place);
    if (device) program = programs_.cache().defining(definition.image, name, *device);
    else llvm::consumeError(device.takeError());  // programFor says why
  }
  if (program && !*program) program = programs_.programFor(lock, definition.image, found->place);
  if (!program) return program.takeError();
  // The program found reaches the variable's instance in the one that holds it.
  if (definition.kind == SymbolKind::Variable && !(*program)->defines(definition.image, name))
    if (cache::LinkedProgram *holder = programs_.cache().defining(definition.image, name, (*program)->device))
      program = holder;
  // The program holds the image: its label is there, whatever was unloaded meanwhile.
  Located located{(*program)->program, definition, images_[definition.image].label, nullptr};
  if (inGlobalScope && images_[definition.image].host)
    located.hostAddress = images_[definition.image].host->bytes.data();
  lock.letGo();
  return located;
}

}  // namespace devdl
