// The entry points and handles: opening files and memory as handles, references, flags, the
// lookups device_dlsym and friends make, closing.
#include "loader/loader.h"
#include "image/host_objects.h"
#include "loader/object_registry.h"
#include "support/environment.h"
#include "loader/files.h"
#include "cache/image_summary.h"
#include "cache/remote_store.h"
#include "support/debug.h"
#include "support/error.h"

#include "devdl.h"

#include <llvm/ADT/STLExtras.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>

namespace devdl {

namespace {

// One for every loader of the process: one made where another was destroyed (the tests') may
// have the same address and handles at the same addresses, never the same generation.
std::atomic<uint64_t> generation{1};

// The answers device_dlsym gave this thread, by handle and name: given again without the loader's
// lock while the generation they were found in is the loader's (and, for an image of a host
// object found through the global scope, while that object is loaded where it was). All of them
// go when the generation moves, and past kMostRemembered, so that a thread's memory stays
// bounded: a miss only costs the lock. Open addressing over a power of two, at most half full: a
// lookup is a hash and, mostly, one comparison.
class Remembered {
 public:
  struct Answer {
    void *address;
    const void *hostAddress;  // in the host object whose image defines it; null for a handle's image
    bundle::LoadMark hostLoad;
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

Loader::Loader(Options options)
    : devices_(options.backends, std::move(options.backendChoice), options.hostLockWait),
      programs_(options.store),
      hostLockWait_(options.hostLockWait),
      summaries_(options.summaries) {
  changed();
}

Loader::~Loader() { changed(); }

void Loader::changed() { generation.fetch_add(1, std::memory_order_release); }

Loader &Loader::instance() {
  // Never destroyed: handles may be used until exit. DEVDL_BACKEND is read once, as the host
  // loader reads its environment once.
  static Loader *loader = [] {
    const char *choice = devdlVariable("DEVDL_BACKEND");
    auto store = []() -> cache::BinaryStore & { return cache::processStore(); };
    return new Loader({backend::builtinBackends(), store, choice ? choice : "", std::chrono::milliseconds(1000),
                       &cache::DiskCache::process});
  }();
  return *loader;
}

void Loader::Lock::release() {
  if (!lock_.owns_lock()) return;
  std::vector<std::shared_ptr<const void>> released = std::move(loader_.released_);
  loader_.released_.clear();
  lock_.unlock();
  released.clear();  // programs released by the backend, references dropped by the host loader
}

Handle *Loader::findHandle(void *handlePtr) {
  auto it = llvm::find_if(handles_, [&](const auto &h) { return h.get() == handlePtr; });
  return it == handles_.end() ? nullptr : it->get();
}

Handle *Loader::findHandle(const Handle::Identity &identity) {
  auto it = llvm::find_if(handles_, [&](const auto &h) { return h->identity == identity; });
  return it == handles_.end() ? nullptr : it->get();
}

void Loader::joinGlobalScope(const std::vector<uint32_t> &ids) {
  // Programs linked before stay as they were linked, as the host loader's bindings do.
  for (uint32_t id : ids)
    if (scopes_.join(id, images_[id].image) && Debug::get().on(Debug::Libs))
      Debug::get().print("global scope += " + images_[id].label);
  changed();
  // The process's first scope is reported once DEVDL_PRELOAD has taken its place in it.
  if (preloaded_) reportDuplicates(ids);
}

void Loader::dropImages(const std::vector<uint32_t> &ids) {
  scopes_.leave(ids, images_.pointers());
  // A host object's images may be another handle's recorded dependencies.
  for (const auto &handle : handles_) handle->local.remove(ids, images_.pointers());
  for (uint32_t id : ids) images_.unload(id);
  for (std::unique_ptr<cache::LinkedProgram> &unused : programs_.dropUses(ids, released_)) {
    for (uint32_t id = 0; id < images_.end(); ++id)
      if (images_.contains(id) && images_[id].program == unused.get()) images_[id].program = nullptr;
    for (uint32_t id : unused->images) images_.release(id);
  }
  changed();
}

cache::LinkedProgram *Loader::keepProgram(std::vector<cache::ContentHash> key, std::vector<uint32_t> images,
                                          std::vector<cache::LinkedProgram::Use> uses, backend::Device *device,
                                          std::shared_ptr<backend::Program> program) {
  for (uint32_t id : images) images_.hold(id);
  return programs_.add(std::move(key), std::move(images), std::move(uses), device, std::move(program));
}

llvm::Expected<ImageFile> Loader::readFile(const std::shared_ptr<const RegularFile> &file) {
  cache::DiskCache *cache = summaries_ ? &summaries_() : nullptr;
  if (!cache || !cache->enabled()) return readImageFile(*file);
  struct timespec now {};
  clock_gettime(CLOCK_REALTIME, &now);
  const std::optional<cache::Key> key = cache::summaryKey(file->status(), now);
  if (!key) return readImageFile(*file);
  if (std::optional<cache::Entry> entry = cache->loadSummary(*key)) {
    auto images = cache::imagesOfSummary(std::move(*entry), file);
    if (images) return images;
    // Its checksum held, so devdl wrote it: reported, and the file read as if it had none.
    if (Debug::get().on(Debug::Statistics)) Debug::get().print("cache: " + llvm::toString(images.takeError()));
    else llvm::consumeError(images.takeError());
  }
  auto read = readImageFile(*file);
  if (read)
    if (std::string summary = cache::summarize(*read); !summary.empty())
      cache->storeSummary(*key, "image summary of " + file->path(), summary);
  return read;
}

std::vector<Loader::NewImage> Loader::prepare(ImageFile read, bool mayOpenDevice) {
  std::vector<NewImage> images;
  for (DeviceImage &image : read.images) images.push_back(judge(std::move(image), mayOpenDevice));
  return images;
}

llvm::Expected<void *> Loader::open(const char *name, int flags) {
  if (!name) {
    Lock lock(*this);
    scanProcess(lock);
    return globalHandle();
  }
  if ((flags & (DEVDL_LAZY | DEVDL_NOW)) == 0)
    return fail(ErrorCode::InvalidArgument, "device_dlopen: flags must include DEVDL_LAZY or DEVDL_NOW");
  auto opened = openNamedFile(name);
  if (!opened) return opened.takeError();
  // Shared: the images taken from its summary read it when they are linked.
  const auto file = std::make_shared<const RegularFile>(std::move(*opened));
  Lock lock(*this);
  scanProcess(lock);
  auto handle = openIdentified(lock, {file->status().st_dev, file->status().st_ino, nullptr, 0}, flags, file->path(),
                               [&] { return readFile(file); });
  if (!handle) return handle.takeError();
  return *handle;
}

llvm::Expected<void *> Loader::openMemory(const void *data, size_t size, const char *name, int flags) {
  if (!data || !size) return fail(ErrorCode::InvalidArgument, "device_dlopen_mem: no data");
  if ((flags & (DEVDL_LAZY | DEVDL_NOW)) == 0)
    return fail(ErrorCode::InvalidArgument, "device_dlopen_mem: flags must include DEVDL_LAZY or DEVDL_NOW");
  const std::string label = name ? name : "(memory)";
  // Read from a copy: the images outlive the handle where programs use them, and the caller may
  // free its memory once the handle is closed (or, as it is, once this returns).
  auto read = [&] {
    auto storage = std::make_shared<Storage>(
        llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(static_cast<const char *>(data), size), label));
    const Bytes bytes = storage->bytes();
    return readImageMemory(bytes, label, std::move(storage));
  };
  Lock lock(*this);
  scanProcess(lock);
  auto handle = openIdentified(lock, {0, 0, data, size}, flags, label, read);
  if (!handle) return handle.takeError();
  return *handle;
}

llvm::Expected<Handle *> Loader::openIdentified(Lock &lock, const Handle::Identity &identity, int flags,
                                                const std::string &name,
                                                llvm::function_ref<llvm::Expected<ImageFile>()> read) {
  for (;;) {
    if (Handle *open = findHandle(identity)) return reopen(lock, *open, flags);
    if (flags & DEVDL_NOLOAD) return fail(ErrorCode::NotFound, name + ": not loaded (DEVDL_NOLOAD)");
    // Read, and judged by the devices (which may be opened now), with the lock let go.
    lock.release();
    auto file = read();
    std::vector<NewImage> images;
    std::string fileName;
    if (file) {
      fileName = file->name;
      images = prepare(std::move(*file), /*mayOpenDevice=*/true);
    }
    lock.acquire();
    if (!file) return file.takeError();
    if (findHandle(identity)) continue;  // another thread opened it meanwhile: that handle
    auto handle = addHandle(fileName, std::move(images), identity, flags);
    if (!handle) return handle.takeError();
    // As RTLD_NOW: linked now, or the open fails and leaves nothing behind.
    if (flags & DEVDL_NOW)
      if (llvm::Error err = linkNow(lock, **handle)) {
        release(*handle);
        return err;
      }
    return *handle;
  }
}

llvm::Expected<Handle *> Loader::reopen(Lock &lock, Handle &handle, int flags) {
  // As dlopen(RTLD_NOW) of a library loaded lazily: its links are made now, or the open fails
  // and the handle stays as it was. The reference taken first keeps it while the lock is let go.
  ++handle.references;
  if ((flags & DEVDL_NOW) && !handle.linkedNow)
    if (llvm::Error err = linkNow(lock, handle)) {
      release(&handle);
      return err;
    }
  handle.nodelete |= (flags & DEVDL_NODELETE) != 0;
  if ((flags & DEVDL_GLOBAL) && !handle.global) {
    handle.global = true;
    joinGlobalScope(handle.images);
  }
  return &handle;
}

llvm::Expected<Handle *> Loader::addHandle(std::string name, std::vector<NewImage> images,
                                           const Handle::Identity &identity, int flags) {
  auto handle = std::make_unique<Handle>();
  handle->path = std::move(name);
  handle->identity = identity;
  handle->references = 1;
  handle->nodelete = (flags & DEVDL_NODELETE) != 0;
  handle->local.deepbind = (flags & DEVDL_DEEPBIND) != 0;
  for (size_t i = 0; i < images.size(); ++i) {
    const uint32_t id = images_.add(std::move(images[i].image), handle->path, static_cast<unsigned>(i), handle.get());
    images_[id].candidacy = images[i].candidacy;
    images_[id].whyNot = std::move(images[i].whyNot);
    if (images_[id].candidacy == LoadedImage::Candidacy::Unknown) undecided_.push_back(id);
    handle->images.push_back(id);
    handle->local.add(images_[id].image, id);
  }
  if (llvm::Error err = addDependencies(*handle)) {
    for (Handle *needed : handle->needed) --needed->references;
    dropImages(handle->images);
    return err;
  }
  if (flags & DEVDL_GLOBAL) {
    handle->global = true;
    joinGlobalScope(handle->images);
  }
  handles_.push_back(std::move(handle));
  return handles_.back().get();
}

llvm::Error Loader::addDependencies(Handle &handle) {
  // As DT_NEEDED: breadth first over the images' recorded dependencies, each once.
  for (size_t next = 0; next < handle.local.images.size(); ++next) {
    const uint32_t id = handle.local.images[next];
    for (std::string_view module : images_[id].image.dependencies()) {
      const std::optional<uint32_t> dependency = findModule(module, handle);
      if (!dependency)
        return fail(ErrorCode::NotFound, images_[id].label + ": depends on module `" + std::string(module) +
                                             "`, which no loaded image is");
      if (llvm::is_contained(handle.local.images, *dependency)) continue;
      handle.local.add(images_[*dependency].image, *dependency);
      Handle *owner = images_[*dependency].owner;
      if (owner && owner != &handle && !llvm::is_contained(handle.needed, owner)) {
        ++owner->references;
        handle.needed.push_back(owner);
      }
    }
  }
  return llvm::Error::success();
}

std::optional<uint32_t> Loader::findModule(std::string_view module, const Handle &handle) const {
  auto is = [&](uint32_t id) { return images_[id].image.moduleId() == module; };
  for (uint32_t id : handle.images)
    if (is(id)) return id;
  for (uint32_t id : scopes_.globalOrder())
    if (is(id)) return id;
  for (uint32_t id = 0; id < images_.end(); ++id)
    if (images_.contains(id) && images_[id].loaded && is(id)) return id;
  return std::nullopt;
}

llvm::Error Loader::linkNow(Lock &lock, Handle &handle) {
  // As RTLD_NOW: every import of every image resolves now, kernels or not; the kernels'
  // programs are linked now.
  judgeUndecided(lock);
  for (uint32_t id : handle.images) {
    const bool hasKernel =
        llvm::any_of(images_[id].image.symbols, [](const Symbol &s) { return s.kind == SymbolKind::Kernel; });
    if (hasKernel) {
      auto program = programFor(lock, id);
      if (!program) return program.takeError();
      continue;
    }
    const uint32_t roots[] = {id};
    if (llvm::Error err = unresolvedError(planFor(roots))) return err;
  }
  handle.linkedNow = true;
  return llvm::Error::success();
}

void Loader::release(Handle *handle) {
  if (--handle->references > 0 || handle->nodelete) return;
  const std::vector<Handle *> needed = std::move(handle->needed);
  dropImages(handle->images);
  handles_.erase(llvm::find_if(handles_, [&](const auto &h) { return h.get() == handle; }));
  // Then what it kept open, as dlclose closes the DT_NEEDED libraries of an object it unloads.
  for (Handle *dependency : needed)
    if (findHandle(dependency) && dependency->references > 0) release(dependency);
}

llvm::Expected<Loader::Found> Loader::lookup(Lock &lock, void *handlePtr, std::string_view name) {
  judgeUndecided(lock);
  auto takes = [&](uint32_t id) { return deviceTakes(id); };
  const Definition *definition = nullptr;
  const Handle *handle = nullptr;  // null: the global scope
  if (handlePtr == globalHandle()) {
    auto findGlobal = [&] { return firstCandidate(scopes_.global().definitions(name), takes); };
    // Objects the host loads later come later in search order and cannot shadow what is found
    // now; only a definition from a host object, which may have been unloaded since, or none at
    // all needs a look at the process first.
    definition = findGlobal();
    if (!definition || images_[definition->image].host) {
      scanProcess(lock);
      definition = findGlobal();
    }
  } else {
    handle = findHandle(handlePtr);
    if (!handle) return fail(ErrorCode::InvalidArgument, "invalid handle");
    definition = firstCandidate(handle->local.index.definitions(name), takes);
    // In a recorded dependency: as one its imports reach.
    if (definition && !llvm::is_contained(handle->images, definition->image))
      return Found{*definition, imageReaching(*handle, definition->image)};
    if (!definition)
      if (std::optional<Found> found = inDependencies(*handle, name)) return *found;
  }
  if (!definition) {
    // Defined, but only in images no device here can take: say so rather than "undefined".
    auto all = handle ? handle->local.index.definitions(name) : scopes_.global().definitions(name);
    if (!all.empty()) {
      const LoadedImage &first = images_[all.front().image];
      return fail(ErrorCode::Unsupported, first.label + ": `" + std::string(name) + "` is in a " +
                                              std::string(formatName(first.image.format)) +
                                              " image, which cannot be linked here: " + first.whyNot);
    }
    return fail(ErrorCode::NotFound, (handle ? handle->path : std::string("the global scope")) +
                                         ": undefined device symbol `" + std::string(name) + "`");
  }
  return Found{*definition, std::nullopt};
}

std::optional<Loader::Found> Loader::inDependencies(const Handle &handle, std::string_view name) {
  // As glibc's dlsym(handle): after the handle's own scope, what its images depend on, breadth
  // first: the images their imports bind to, as the plans of their programs have them (those
  // stay loaded for the programs), else as they would bind now.
  for (uint32_t root : handle.images)
    for (uint32_t id : planOf(root)) {
      if (llvm::is_contained(handle.local.images, id) || !deviceTakes(id)) continue;
      const DeviceImage &image = images_[id].image;
      auto defined =
          llvm::find_if(image.symbols, [&](const Symbol &s) { return s.kind != SymbolKind::Import && s.name == name; });
      if (defined != image.symbols.end()) return Found{{id, defined->kind, linkFamily(image.format)}, root};
    }
  return std::nullopt;
}

std::optional<uint32_t> Loader::imageReaching(const Handle &handle, uint32_t id) {
  // The program of that image holds `id`: the program its kernels use.
  for (uint32_t root : handle.images)
    if (llvm::is_contained(planOf(root), id)) return root;
  return std::nullopt;
}

const LinkPlan *Loader::linkedPlan(uint32_t root) const {
  if (const cache::LinkedProgram *program = images_[root].program)
    for (const cache::LinkedProgram::Use &use : program->uses)
      if (use.root == root) return &use.plan;
  return nullptr;
}

std::vector<uint32_t> Loader::planOf(uint32_t root) {
  if (const LinkPlan *linked = linkedPlan(root)) return linked->images;
  const uint32_t roots[] = {root};
  return planFor(roots).images;
}

llvm::Expected<void *> Loader::symbol(void *handlePtr, std::string_view name) {
  // What this thread found before, while nothing changed: no lock at all.
  const uint64_t now = generation.load(std::memory_order_acquire);
  if (const Remembered::Answer *answer = remembered.find(this, now, handlePtr, name))
    if (!answer->hostAddress || bundle::loadMarkOf(answer->hostAddress) == answer->hostLoad) return answer->address;

  Lock lock(*this);
  lookupsUnderLock_.fetch_add(1, std::memory_order_relaxed);
  auto bound = bind(lock, handlePtr, name);
  if (!bound) return bound.takeError();
  // The native object is made by the backend with the lock let go.
  const Definition &definition = bound->definition;
  auto address = definition.kind == SymbolKind::Kernel     ? bound->program->kernel(name)
                 : definition.kind == SymbolKind::Variable ? bound->program->variable(name)
                                                           : bound->program->function(name);
  if (!address) return inImage(address.takeError(), bound->label);
  // A host object's image answers while that load of the object is there: objects loaded later
  // come after it in the global scope, and one unloaded since is rescanned.
  std::optional<bundle::LoadMark> hostLoad;
  if (bound->hostAddress && !(hostLoad = bundle::loadMarkOf(bound->hostAddress))) return *address;
  remembered.add(this, now, handlePtr, name, {*address, bound->hostAddress, hostLoad.value_or(bundle::LoadMark{})});
  return *address;
}

llvm::Expected<Loader::Bound> Loader::bind(Lock &lock, void *handlePtr, std::string_view name) {
  auto found = lookup(lock, handlePtr, name);
  if (!found) return found.takeError();
  const Definition definition = found->definition;
  llvm::Expected<cache::LinkedProgram *> program = nullptr;
  if (found->through) {
    // Found among the handle's dependencies: in the program of the image that reaches it, whose
    // kernels use this very instance.
    program = programFor(lock, *found->through);
  } else if (definition.kind != SymbolKind::Kernel) {
    // A variable has an instance in each program its image is linked into: the address given
    // is the one in the first program that holds it, which is where the kernels that were
    // requested before it read it. Only with no such program is one linked for the image.
    program = programs_.holding(definition.image);
  }
  if (program && !*program) program = programFor(lock, definition.image);
  if (!program) return program.takeError();
  // The program holds the image: its label is there, whatever was unloaded meanwhile.
  Bound bound{(*program)->program, definition, images_[definition.image].label, nullptr};
  if (handlePtr == globalHandle() && images_[definition.image].host)
    bound.hostAddress = images_[definition.image].host->bytes.data();
  lock.release();
  return bound;
}

llvm::Error Loader::copy(void *handlePtr, std::string_view name, size_t offset, void *host, size_t size,
                         bool toDevice) {
  Lock lock(*this);
  auto bound = bind(lock, handlePtr, name);
  if (!bound) return bound.takeError();
  if (bound->definition.kind != SymbolKind::Variable)
    return fail(ErrorCode::InvalidArgument, bound->label + ": `" + std::string(name) + "` is a " +
                                                std::string(symbolKindName(bound->definition.kind)) +
                                                ", not a device variable");
  return inImage(bound->program->copyVariable(name, offset, host, size, toDevice), bound->label);
}

llvm::Expected<std::pair<std::string, uint32_t>> Loader::objectIn(
    Lock &lock, void *handlePtr, const void *object, std::string_view kind, std::string_view what,
    llvm::function_ref<bool(const DeviceImage &, std::string_view)> has) {
  char address[32];
  std::snprintf(address, sizeof address, "%p", object);
  const std::optional<ObjectRegistry::Entry> entry = ObjectRegistry::instance().find(object);
  if (!entry)
    return fail(ErrorCode::NotFound, std::string(what) + ": no host object is registered at " + address +
                                         " (__register_uniquely_identifiable_object, device_dlregister)");
  if (entry->kind != kind)
    return fail(ErrorCode::InvalidArgument, std::string(what) + ": the object at " + address + ", `" + entry->uniqueId +
                                                "`, is a " + entry->kind + ", not a " + std::string(kind));
  const Handle *handle = handlePtr == globalHandle() ? nullptr : findHandle(handlePtr);
  if (!handle && handlePtr != globalHandle()) return fail(ErrorCode::InvalidArgument, std::string(what) + ": invalid handle");
  scanProcess(lock);
  std::vector<uint32_t> scope;
  if (handle) scope = handle->local.images;
  for (uint32_t id : scopes_.globalOrder()) scope.push_back(id);
  for (uint32_t id : scope)
    if (images_.contains(id) && images_[id].loaded && has(images_[id].image, entry->uniqueId))
      return std::pair{entry->uniqueId, id};
  return fail(ErrorCode::NotFound, std::string(what) + ": the " + std::string(kind) + " `" + entry->uniqueId +
                                       "` registered at " + address + " is defined by no image in the scope of " +
                                       (handle ? handle->path : std::string("the global scope")));
}

llvm::Error Loader::copyObject(void *handlePtr, const void *object, size_t offset, void *host, size_t size,
                               bool toDevice) {
  const char *what = toDevice ? "device_dlwrite_object" : "device_dlread_object";
  std::string variable;
  uint32_t bytes = 0;
  {
    Lock lock(*this);
    auto found = objectIn(lock, handlePtr, object, "device_global", what, [](const DeviceImage &image,
                                                                             std::string_view id) {
      return deviceGlobalOf(image, id).has_value();
    });
    if (!found) return found.takeError();
    const DeviceGlobal global = *deviceGlobalOf(images_[found->second].image, found->first);
    variable = std::string(global.variable);
    bytes = global.size;
  }
  if (offset > bytes || size > bytes - offset)
    return fail(ErrorCode::InvalidArgument, std::string(what) + ": the device global `" + variable + "` has " +
                                                std::to_string(bytes) + " bytes: " + std::to_string(size) +
                                                " at offset " + std::to_string(offset) + " are outside it");
  return copy(handlePtr, variable, offset, host, size, toDevice);
}

llvm::Error Loader::specializeObject(void *handlePtr, const void *object, std::string_view value) {
  std::vector<SpecConstantPart> parts;
  {
    Lock lock(*this);
    auto found = objectIn(lock, handlePtr, object, "specialization_id", "device_dlspecialize_object",
                          [](const DeviceImage &image, std::string_view id) {
                            return !specConstantPartsOf(image, id).empty();
                          });
    if (!found) return found.takeError();
    parts = specConstantPartsOf(images_[found->second].image, found->first);
  }
  for (const SpecConstantPart &part : parts) {
    if (part.offset > value.size() || part.size > value.size() - part.offset)
      return fail(ErrorCode::InvalidArgument, "device_dlspecialize_object: a value of " + std::to_string(value.size()) +
                                                  " bytes: SpecId " + std::to_string(part.specId) + " takes " +
                                                  std::to_string(part.size) + " at offset " +
                                                  std::to_string(part.offset));
    if (llvm::Error err = specialize(handlePtr, part.specId, value.substr(part.offset, part.size))) return err;
  }
  return llvm::Error::success();
}

llvm::Error Loader::symbolInfo(void *handlePtr, std::string_view name, devdl_symbol_info &out) {
  Lock lock(*this);
  auto found = lookup(lock, handlePtr, name);
  if (!found) return found.takeError();
  const Definition &definition = found->definition;
  const LoadedImage &image = images_[definition.image];
  out.kind = definition.kind == SymbolKind::Kernel     ? DEVDL_SYMBOL_KERNEL
             : definition.kind == SymbolKind::Variable ? DEVDL_SYMBOL_VARIABLE
                                                       : DEVDL_SYMBOL_FUNCTION;
  out.file = image.file.c_str();
  out.image = image.index;
  out.format = formatName(image.image.format).data();  // the names are NUL-terminated literals
  return llvm::Error::success();
}

llvm::Expected<std::string> Loader::planText(void *handlePtr, std::string_view name) {
  Lock lock(*this);
  auto found = lookup(lock, handlePtr, name);
  if (!found) return found.takeError();
  if (found->definition.kind != SymbolKind::Kernel)
    return fail(ErrorCode::InvalidArgument, "`" + std::string(name) + "` is not a kernel");
  scanProcess(lock);
  const uint32_t roots[] = {found->definition.image};
  if (!images_.contains(roots[0]) || !images_[roots[0]].loaded)
    return fail(ErrorCode::NotFound, "`" + std::string(name) + "`: its image was unloaded meanwhile");
  // The plan its program was linked from, where it has one: what the kernel runs, libraries
  // closed since included. Else the plan as the scopes are now.
  const LinkPlan *linked = linkedPlan(roots[0]);
  const LinkPlan &plan = linked ? *linked : planFor(roots);
  std::string text = std::string(name) + ": " + images_[roots[0]].label + "\n";
  for (const Binding &b : plan.bindings)
    text += "  " + std::string(b.symbol) + " (" + images_[b.importer].label + ") -> " + images_[b.definer].label + "\n";
  for (const auto &u : plan.unresolved)
    text += "  " + std::string(u.symbol) + " (" + images_[u.importer].label + ") -> undefined\n";
  for (const LinkPlan::Joined &j : plan.joined) text += "  " + images_[j.image].label + ": " + j.why + "\n";
  for (const std::string &problem : plan.setProblems) text += "  " + problem + "\n";
  if (!plan.unresolved.empty() || !plan.setProblems.empty()) return fail(ErrorCode::Unresolved, text);
  return text;
}

std::vector<Loader::ImageSnapshot> Loader::snapshot() {
  Lock lock(*this);
  scanProcess(lock);
  std::vector<ImageSnapshot> list;
  auto add = [&](uint32_t id) {
    const LoadedImage &image = images_[id];
    list.push_back({image.file, image.index, std::string(formatName(image.image.format)),
                    std::string(image.image.triple), scopes_.isGlobal(id), image.image.symbols.size()});
  };
  for (uint32_t id : scopes_.globalOrder()) add(id);
  for (uint32_t id = 0; id < images_.end(); ++id)
    if (images_.contains(id) && images_[id].loaded && !scopes_.isGlobal(id)) add(id);
  return list;
}

llvm::Error Loader::attach(const devdl_native &native) {
  const backend::BackendEntry *row = devices_.entry(native.backend);
  if (!row || !row->attach)
    return fail(ErrorCode::Unsupported, "device_dlattach: backend " + std::to_string(native.backend) +
                                            " is not in this build (" + devices_.names(/*inBuild=*/true) + " are)");
  auto attached = row->attach(native);
  if (!attached) return attached.takeError();
  Lock lock(*this);
  if (backend::Device *current = devices_.opened(native.backend)) {
    devdl_native now{sizeof now, 0, nullptr, nullptr, nullptr};
    current->native(now);
    if (now.device == native.device && now.context == native.context) return llvm::Error::success();
    if (programs_.anyOn(current))
      return fail(ErrorCode::InvalidArgument, "device_dlattach: programs are already linked for " + current->name());
  }
  devices_.replace(std::move(*attached));
  // Another device may take other images: each is judged again, with the lock let go.
  for (uint32_t id = 0; id < images_.end(); ++id)
    if (images_.contains(id) && images_[id].loaded) {
      images_[id].candidacy = LoadedImage::Candidacy::Unknown;
      images_[id].program = nullptr;
      undecided_.push_back(id);
    }
  changed();
  judgeUndecided(lock);
  return llvm::Error::success();
}

llvm::Error Loader::close(void *handlePtr) {
  Lock lock(*this);
  if (handlePtr == globalHandle()) return llvm::Error::success();
  Handle *handle = findHandle(handlePtr);
  if (!handle) return fail(ErrorCode::InvalidArgument, "device_dlclose: invalid handle");
  // Only a DEVDL_NODELETE handle stays with no reference; closing it then is an error, as
  // dlclose of a NODELETE object already closed is ("shared object not open").
  if (handle->references == 0)
    return fail(ErrorCode::InvalidArgument,
                "device_dlclose: " + handle->path + " is not open (DEVDL_NODELETE keeps it loaded)");
  release(handle);
  return llvm::Error::success();
}

llvm::Error Loader::specialize(void *handlePtr, unsigned specId, std::string_view value) {
  Lock lock(*this);
  const Handle *handle = findHandle(handlePtr);
  if (!handle) return fail(ErrorCode::InvalidArgument, "device_dlspecialize: invalid handle");
  if (value.size() != 1 && value.size() != 2 && value.size() != 4 && value.size() != 8)
    return fail(ErrorCode::InvalidArgument, handle->path + ": specialization constant " + std::to_string(specId) +
                                                ": a value of " + std::to_string(value.size()) +
                                                " bytes (1, 2, 4 or 8 are)");
  bool declared = false;
  std::vector<uint32_t> specialized;
  for (uint32_t id : handle->images) {
    LoadedImage &loaded = images_[id];
    const PropertySet *set = loaded.image.findSet(kSpecConstantsSet);
    if (!set || !llvm::any_of(set->properties, [&](const Property &p) { return declaresSpecId(p, specId); })) continue;
    declared = true;
    specialized.push_back(id);
    loaded.specConstants[specId] = std::string(value);
    // What the image's programs are keyed by: its bytes and the values set.
    cache::KeyBuilder builder;
    builder.add(loaded.bytesHash.low).add(loaded.bytesHash.high);
    for (const auto &[spec, bytes] : loaded.specConstants) builder.add(uint64_t(spec)).add(bytes);
    const cache::Key key = builder.finish();
    loaded.hash = {key.low, key.high};
  }
  if (!declared)
    return fail(ErrorCode::NotFound, handle->path + ": no image declares specialization constant " + std::to_string(specId));
  // Later lookups of kernels whose programs hold these images link with the new values; the
  // programs found before stay for what was found in them.
  for (uint32_t id = 0; id < images_.end(); ++id)
    if (images_.contains(id) && images_[id].program &&
        llvm::any_of(specialized, [&](uint32_t s) { return images_[id].program->holds(s); }))
      images_[id].program = nullptr;
  changed();
  return llvm::Error::success();
}

llvm::Error Loader::native(devdl_native &out) {
  // The devices open themselves without the loader's lock.
  const int which = out.backend ? out.backend : devices_.defaultBackend();
  if (!devices_.entry(which))
    return fail(ErrorCode::InvalidArgument, "device_dlnative: unknown backend " + std::to_string(which));
  auto dev = devices_.device(which);
  if (!dev) return dev.takeError();
  (*dev)->native(out);
  return llvm::Error::success();
}

}  // namespace devdl
