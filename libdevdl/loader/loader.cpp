// The entry points and handles: opening files and memory as handles, references, flags,
// DEVDL_NOW, closing, specializing, attaching. Lookups are in lookup.cpp, the other queries in
// queries.cpp, programs in programs.cpp.
#include "loader/loader.h"

#include "cache/image_summary.h"
#include "cache/remote_store.h"
#include "image/registered_objects.h"
#include "loader/files.h"
#include "support/debug.h"
#include "support/environment.h"
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


Loader::Loader(Options options)
    : devices_(options.backends, std::move(options.backendChoice), options.hostLockWait),
      programs_(options.store, options.hostLockWait),
      summaries_(options.summaries) {
  changed();
}

Loader::~Loader() { changed(); }

void Loader::changed() { generation_.fetch_add(1, std::memory_order_release); }

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

std::optional<Loader::Target> Loader::targetOf(void *pointer) const {
  if (pointer == &globalScopeTag_ || llvm::any_of(handles_, [&](const auto &h) { return h.get() == pointer; }))
    return Target{pointer, 0};
  for (const auto &view : views_)
    if (view.get() == pointer) return Target{view->handle, view->place};
  return std::nullopt;
}

unsigned Loader::placeFor(const DeviceImage &image, unsigned place) const {
  return place && devices_.links(*places_[place], linkFamily(image.format)) ? place : 0;
}

llvm::Expected<backend::Device *> Loader::deviceAt(const DeviceImage &image, unsigned place) {
  if (unsigned at = placeFor(image, place)) return places_[at];
  return devices_.forImage(image);
}

llvm::Expected<void *> Loader::view(void *pointer, const devdl_native &native) {
  {  // The handle first: an invalid one says so, whatever the device.
    Lock lock(*this);
    if (!targetOf(pointer)) return fail(ErrorCode::InvalidArgument, "device_dlview: invalid handle");
  }
  // The device is found, or attached, with the lock let go: that calls the driver.
  auto device = devices_.forNative(native);
  if (!device) return fail(ErrorCode::NotFound, "device_dlview: " + llvm::toString(device.takeError()));
  Lock lock(*this);
  std::optional<Target> target = targetOf(pointer);
  if (!target) return fail(ErrorCode::InvalidArgument, "device_dlview: invalid handle");
  auto at = llvm::find(places_, *device);
  const unsigned place = static_cast<unsigned>(at - places_.begin());
  if (at == places_.end()) places_.push_back(*device);
  auto existing = [&]() -> View * {
    for (const auto &view : views_)
      if (view->handle == target->handle && view->place == place) return view.get();
    return nullptr;
  };
  if (View *view = existing()) return view;
  // A handle opened DEVDL_NOW is linked on the view's device now too: an error leaves no view.
  if (Handle *handle = findHandle(target->handle); handle && handle->linkedNow) {
    if (llvm::Error err = linkNow(lock, *handle, place)) return err;
    if (!targetOf(pointer)) return fail(ErrorCode::NotFound, "device_dlview: the handle was closed meanwhile");
    if (View *view = existing()) return view;
  }
  views_.push_back(std::make_unique<View>(View{target->handle, place}));
  return views_.back().get();
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
  dropPrograms(ids);
  changed();
}

void Loader::dropPrograms(std::span<const uint32_t> roots) {
  auto loaded = [&](uint32_t id) { return images_.contains(id) && images_[id].loaded; };
  for (std::unique_ptr<cache::LinkedProgram> &unused : programs_.dropUses(roots, loaded, released_)) {
    for (uint32_t id = 0; id < images_.end(); ++id)
      if (images_.contains(id))
        for (cache::LinkedProgram *&program : images_[id].programs)
          if (program == unused.get()) program = nullptr;
    for (uint32_t id : unused->images) images_.release(id);
  }
}

cache::LinkedProgram *Loader::keepProgram(cache::ProgramKey key, std::vector<uint32_t> images,
                                          std::vector<std::vector<std::string_view>> hidden,
                                          std::vector<cache::LinkedProgram::Use> uses, backend::Device *device,
                                          std::shared_ptr<backend::Program> program,
                                          std::shared_ptr<const std::string> binary) {
  for (uint32_t id : images) images_.hold(id);
  return programs_.add(std::move(key), std::move(images), std::move(hidden), std::move(uses), device,
                       std::move(program), std::move(binary));
}

llvm::Expected<ImageFile> Loader::readFile(const std::shared_ptr<const RegularFile> &file) {
  return cache::readImageFileSummarized(file, summaries_ ? &summaries_() : nullptr);
}

std::vector<Loader::NewImage> Loader::prepare(ImageFile read, bool mayOpenDevice) {
  std::vector<NewImage> images;
  for (DeviceImage &image : read.images) images.push_back(withCandidacy(std::move(image), mayOpenDevice));
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
  auto handle = openIdentified(lock, Handle::Identity::of(*file), flags, file->path(), file,
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
  auto handle = openIdentified(lock, {0, 0, data, size, 0}, flags, label, nullptr, read);
  if (!handle) return handle.takeError();
  return *handle;
}

llvm::Expected<Handle *> Loader::openIdentified(Lock &lock, const Handle::Identity &identity, int flags,
                                                const std::string &name, std::shared_ptr<const RegularFile> opened,
                                                llvm::function_ref<llvm::Expected<ImageFile>()> read) {
  for (;;) {
    if (Handle *open = findHandle(identity)) return reopen(lock, *open, flags);
    if (flags & DEVDL_NOLOAD) return fail(ErrorCode::NotFound, name + ": not loaded (DEVDL_NOLOAD)");
    std::vector<Handle::Identity> open;
    for (const auto &handle : handles_) open.push_back(handle->identity);
    // Read, with the files it needs, and their candidacy decided (devices may be opened now),
    // with the lock let go.
    lock.release();
    auto files = [&]() -> llvm::Expected<std::vector<OpenedFile>> {
      auto file = read();
      if (!file) return file.takeError();
      OpenedFile first{file->name, opened != nullptr, identity, false, {}, {}, opened};
      first.images = prepare(std::move(*file), /*mayOpenDevice=*/true);
      return readNeeded(std::move(first), open, /*mayOpenDevice=*/true);
    }();
    lock.acquire();
    if (!files) return files.takeError();
    if (findHandle(identity)) continue;  // another thread opened it meanwhile: that handle
    auto handle = addHandles(*files, flags);
    if (!handle) return handle.takeError();
    if (!*handle) continue;  // a file it needs, open before, was closed meanwhile: read it
    // As RTLD_NOW: linked now, or the open fails and leaves nothing behind, NODELETE or not.
    if (flags & DEVDL_NOW)
      if (llvm::Error err = linkNow(lock, **handle)) {
        (*handle)->nodelete = false;
        release(*handle);
        return err;
      }
    return *handle;
  }
}

llvm::Expected<Handle *> Loader::reopen(Lock &lock, Handle &handle, int flags) {
  // As dlopen(RTLD_NOW) of a library loaded lazily: its links are made now, or the open fails
  // and the handle stays as it was. Promoted first, as a first open with DEVDL_GLOBAL joins the
  // global scope before it links: its images' imports may be bound to one another there. The
  // reference taken first keeps it while the lock is let go.
  ++handle.references;
  const std::vector<Handle *> promoted = (flags & DEVDL_GLOBAL) ? makeGlobal(handle) : std::vector<Handle *>();
  if ((flags & DEVDL_NOW) && !handle.linkedNow)
    if (llvm::Error err = linkNow(lock, handle)) {
      for (Handle *each : promoted)
        if (findHandle(each) && each->global) {
          each->global = false;
          scopes_.leave(each->images, images_.pointers());
        }
      changed();
      release(&handle);
      return err;
    }
  handle.nodelete |= (flags & DEVDL_NODELETE) != 0;
  return &handle;
}

llvm::Error Loader::linkNow(Lock &lock, Handle &handle, unsigned place) {
  // As RTLD_NOW: every import of every image resolves now, kernels or not; the kernels'
  // programs are linked now.
  decideCandidacies(lock, place);
  for (uint32_t id : handle.images) {
    const bool hasKernel =
        llvm::any_of(images_[id].image.symbols, [](const Symbol &s) { return s.kind == SymbolKind::Kernel; });
    if (hasKernel) {
      auto program = programFor(lock, id, place);
      if (!program) return program.takeError();
      continue;
    }
    if (llvm::Error err = resolvesNow(id, place)) return err;
  }
  // What the handle holds is linked as its kernels are used, but its imports resolve now, as
  // RTLD_NOW binds a library's dependencies' relocations too.
  for (size_t i = 0; i < handle.needed.size(); ++i)
    if (findHandle(handle.needed[i]))
      for (uint32_t id : handle.needed[i]->images)
        if (llvm::Error err = resolvesNow(id, place)) return err;
  handle.linkedNow = true;
  return llvm::Error::success();
}

llvm::Error Loader::resolvesNow(uint32_t id, unsigned place) {
  const uint32_t roots[] = {id};
  const Planner planner = this->planner(placeFor(images_[id].image, place));
  return planner.unresolvedError(planner.plan(roots));
}

void Loader::release(Handle *handle) {
  if (--handle->references > 0 || handle->nodelete) return;
  const std::vector<Handle *> needed = std::move(handle->needed);
  // An image of a cycle of needed files may outlive this file it needs (Handle::needed).
  for (uint32_t id = 0; id < images_.end(); ++id)
    if (images_.contains(id)) llvm::erase_value(images_[id].needs, handle);
  dropImages(handle->images);
  llvm::erase_if(views_, [&](const auto &view) { return view->handle == handle; });
  handles_.erase(llvm::find_if(handles_, [&](const auto &h) { return h.get() == handle; }));
  // Then what it kept open, as dlclose closes the DT_NEEDED libraries of an object it unloads.
  for (Handle *dependency : needed)
    if (findHandle(dependency) && dependency->references > 0) release(dependency);
}

llvm::Error Loader::attach(const devdl_native &native) {
  const backend::BackendEntry *row = devices_.entry(native.backend);
  if (!row || !row->attach)
    return fail(ErrorCode::Unsupported, "device_dlattach: backend " + std::to_string(native.backend) +
                                            " is not in this build (" + devices_.names(/*inBuild=*/true) + " are)");
  auto attached = row->attach(native);
  if (!attached) return fail(ErrorCode::NotFound, "device_dlattach: " + llvm::toString(attached.takeError()));
  Lock lock(*this);
  if (backend::Device *current = devices_.opened(native.backend)) {
    devdl_native now{sizeof now, 0, nullptr, nullptr, nullptr};
    current->native(now);
    if (now.device == native.device && now.context == native.context) return llvm::Error::success();
    if (programs_.anyOn(current))
      return fail(ErrorCode::InvalidArgument, "device_dlattach: programs are already linked for " + current->name());
  }
  devices_.replace(std::move(*attached));
  // Another device may take other images: each one's candidacy is decided again, with the lock let go.
  for (uint32_t id = 0; id < images_.end(); ++id)
    if (images_.contains(id) && images_[id].loaded) {
      images_[id].candidacy = Candidacy::Undecided;
      images_[id].elsewhere.clear();  // some were as on the default device
      images_[id].programs.clear();
      undecided_.push_back(id);
    }
  changed();
  decideCandidacies(lock);
  return llvm::Error::success();
}

llvm::Error Loader::close(void *handlePtr) {
  Lock lock(*this);
  std::optional<Target> target = targetOf(handlePtr);
  if (!target) return fail(ErrorCode::InvalidArgument, "device_dlclose: invalid handle");
  // The global scope's handle, or a view: nothing to drop.
  if (handlePtr == globalHandle() || target->handle != handlePtr) return llvm::Error::success();
  Handle *handle = findHandle(handlePtr);
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
  std::optional<Target> target = targetOf(handlePtr);
  const Handle *handle = target ? findHandle(target->handle) : nullptr;  // of the handle, on every device
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
    loaded.hash = cache::ContentHash::specialized(loaded.bytesHash, loaded.specConstants);
  }
  if (!declared)
    return fail(ErrorCode::NotFound, handle->path + ": no image declares specialization constant " + std::to_string(specId));
  // Later lookups of kernels whose programs hold these images link with the new values; the
  // programs found before stay for what was found in them.
  for (uint32_t id = 0; id < images_.end(); ++id)
    if (images_.contains(id))
      for (cache::LinkedProgram *&program : images_[id].programs)
        if (program && llvm::any_of(specialized, [&](uint32_t s) { return program->holds(s); })) program = nullptr;
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