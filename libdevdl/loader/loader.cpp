// The entry points that open and close: files and memory as handles (reading.h reads them,
// handles.h keeps them), DEVDL_NOW, closing, views, specializing, attaching. Lookups are in
// lookups.h and symbol.cpp, the other queries in queries.cpp.
#include "loader/loader.h"

#include "store/remote_store.h"
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
      places_(devices_),
      candidacies_(images_, devices_, places_),
      programs_({images_, scopes_, places_, devices_, mutex_, [this](LoaderLock &lock) { scan_.scan(lock); }},
                options.store, options.hostLockWait),
      handles_(images_, scopes_, candidacies_, programs_),
      reader_(candidacies_, options.summaries),
      scan_(images_, scopes_, handles_, candidacies_, reader_),
      lookups_({images_, scopes_, handles_, candidacies_, programs_, places_, scan_}) {
  Generation::move();
}

Loader::~Loader() { Generation::move(); }

Loader &Loader::instance() {
  // Never destroyed: handles may be used until exit. DEVDL_BACKEND is read once, as the host
  // loader reads its environment once.
  static Loader *loader = [] {
    const char *choice = devdlVariable("DEVDL_BACKEND");
    auto store = []() -> store::BinaryStore & { return store::processStore(); };
    return new Loader({backend::builtinBackends(), store, choice ? choice : "", std::chrono::milliseconds(1000),
                       &store::DiskCache::process});
  }();
  return *loader;
}

llvm::Expected<void *> Loader::view(void *pointer, const devdl_native &native) {
  {  // The handle first: an invalid one says so, whatever the device.
    LoaderLock lock(mutex_);
    if (!handles_.targetOf(pointer)) return fail(ErrorCode::InvalidArgument, "device_dlview: invalid handle");
  }
  // The device is found, or attached, with the mutex let go: that calls the driver.
  auto device = devices_.forNative(native);
  if (!device) return fail(ErrorCode::NotFound, "device_dlview: " + llvm::toString(device.takeError()));
  LoaderLock lock(mutex_);
  std::optional<Handles::Target> target = handles_.targetOf(pointer);
  if (!target) return fail(ErrorCode::InvalidArgument, "device_dlview: invalid handle");
  const unsigned place = places_.placeOf(*device);
  if (View *view = handles_.viewOf(target->handle, place)) return view;
  // A handle opened DEVDL_NOW is linked on the view's device now too: an error leaves no view.
  if (Handle *handle = handles_.find(target->handle); handle && handle->linkedNow) {
    if (llvm::Error err = linkNow(lock, *handle, place)) return err;
    if (!handles_.targetOf(pointer)) return fail(ErrorCode::NotFound, "device_dlview: the handle was closed meanwhile");
    if (View *view = handles_.viewOf(target->handle, place)) return view;
  }
  return handles_.addView(target->handle, place);
}

llvm::Expected<void *> Loader::open(const char *name, int flags) {
  if (!name) {
    LoaderLock lock(mutex_);
    scan_.scan(lock);
    return handles_.global();
  }
  if ((flags & (DEVDL_LAZY | DEVDL_NOW)) == 0)
    return fail(ErrorCode::InvalidArgument, "device_dlopen: flags must include DEVDL_LAZY or DEVDL_NOW");
  auto opened = openNamedFile(name);
  if (!opened) return opened.takeError();
  // Shared: the images taken from its summary read it when they are linked.
  const auto file = std::make_shared<const RegularFile>(std::move(*opened));
  LoaderLock lock(mutex_);
  scan_.scan(lock);
  auto handle = openIdentified(lock, FileIdentity::of(*file), flags, file->path(), file,
                               [&] { return reader_.readFile(file); });
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
  LoaderLock lock(mutex_);
  scan_.scan(lock);
  auto handle = openIdentified(lock, {0, 0, data, size, 0}, flags, label, nullptr, read);
  if (!handle) return handle.takeError();
  return *handle;
}

llvm::Expected<Handle *> Loader::openIdentified(LoaderLock &lock, const FileIdentity &identity, int flags,
                                                const std::string &name, std::shared_ptr<const RegularFile> opened,
                                                llvm::function_ref<llvm::Expected<ImageFile>()> read) {
  for (;;) {
    if (Handle *open = handles_.find(identity)) return reopen(lock, *open, flags);
    if (flags & DEVDL_NOLOAD) return fail(ErrorCode::NotFound, name + ": not loaded (DEVDL_NOLOAD)");
    const std::vector<FileIdentity> open = handles_.identities();
    // Read, with the files it needs, and their candidacy decided (devices may be opened now),
    // with the mutex let go.
    lock.letGo();
    auto files = [&]() -> llvm::Expected<std::vector<OpenedFile>> {
      auto file = read();
      if (!file) return file.takeError();
      OpenedFile first{file->name, opened != nullptr, identity, false, {}, {}, opened};
      first.images = reader_.accept(std::move(*file), /*mayOpenDevice=*/true);
      return reader_.readNeeded(std::move(first), open, /*mayOpenDevice=*/true);
    }();
    lock.takeAgain();
    if (!files) return files.takeError();
    if (handles_.find(identity)) continue;  // another thread opened it meanwhile: that handle
    Handles::Open transaction(handles_);
    auto handle = handles_.add(*files, flags, transaction.record());
    if (!handle) return handle.takeError();
    if (!handle->settled()) continue;  // a file it needs, open before, was closed meanwhile: read it
    // As RTLD_NOW: linked now, or the open fails and leaves nothing behind, NODELETE or not.
    if (flags & DEVDL_NOW)
      if (llvm::Error err = linkNow(lock, ***handle)) return err;
    transaction.keep();
    return **handle;
  }
}

llvm::Expected<Handle *> Loader::reopen(LoaderLock &lock, Handle &handle, int flags) {
  // As dlopen(RTLD_NOW) of a library loaded lazily: its links are made now, or the open fails
  // and the handle stays as it was. Promoted first, as a first open with DEVDL_GLOBAL joins the
  // global scope before it links: its images' imports may be bound to one another there. The
  // reference taken first keeps it while the mutex is let go.
  Handles::Open transaction(handles_);
  handles_.reference(handle, transaction.record());
  if (flags & DEVDL_GLOBAL) handles_.makeGlobal(handle, transaction.record());
  if ((flags & DEVDL_NOW) && !handle.linkedNow)
    if (llvm::Error err = linkNow(lock, handle)) return err;
  transaction.keep();
  handle.nodelete |= (flags & DEVDL_NODELETE) != 0;
  return &handle;
}

llvm::Error Loader::linkNow(LoaderLock &lock, Handle &handle, unsigned place) {
  // As RTLD_NOW: every import of every image resolves now, kernels or not; the kernels'
  // programs are linked now.
  candidacies_.decide(lock, place);
  for (uint32_t id : handle.images) {
    const bool hasKernel =
        llvm::any_of(images_[id].image.symbols, [](const Symbol &s) { return s.kind == SymbolKind::Kernel; });
    if (hasKernel) {
      auto program = programs_.programFor(lock, id, place);
      if (!program) return program.takeError();
      continue;
    }
    if (llvm::Error err = resolvesNow(id, place)) return err;
  }
  // What the handle holds is linked as its kernels are used, but its imports resolve now, as
  // RTLD_NOW binds a library's dependencies' relocations too.
  for (size_t i = 0; i < handle.needed.size(); ++i)
    if (handles_.find(handle.needed[i]))
      for (uint32_t id : handle.needed[i]->images)
        if (llvm::Error err = resolvesNow(id, place)) return err;
  handle.linkedNow = true;
  return llvm::Error::success();
}

llvm::Error Loader::resolvesNow(uint32_t id, unsigned place) {
  const uint32_t roots[] = {id};
  const Planner planner = programs_.planner(places_.placeFor(images_[id].image, place));
  return planner.unresolvedError(planner.plan(roots));
}

llvm::Error Loader::attach(const devdl_native &native) {
  const backend::BackendEntry *row = devices_.entry(native.backend);
  if (!row || !row->attach)
    return fail(ErrorCode::Unsupported, "device_dlattach: backend " + std::to_string(native.backend) +
                                            " is not in this build (" + devices_.names(/*inBuild=*/true) + " are)");
  auto attached = row->attach(native);
  if (!attached) return fail(ErrorCode::NotFound, "device_dlattach: " + llvm::toString(attached.takeError()));
  LoaderLock lock(mutex_);
  if (backend::Device *current = devices_.opened(native.backend)) {
    devdl_native now{sizeof now, 0, nullptr, nullptr, nullptr};
    current->native(now);
    if (now.device == native.device && now.context == native.context) return llvm::Error::success();
    if (programs_.cache().anyOn(current))
      return fail(ErrorCode::InvalidArgument, "device_dlattach: programs are already linked for " + current->name());
  }
  devices_.replace(std::move(*attached));
  // Another device may take other images: each one's candidacy is decided again, with the mutex let go.
  for (uint32_t id = 0; id < images_.end(); ++id)
    if (images_.contains(id) && images_[id].loaded) images_[id].programs.clear();
  candidacies_.undecideAll();
  Generation::move();
  candidacies_.decide(lock);
  return llvm::Error::success();
}

llvm::Error Loader::close(void *handlePtr) {
  LoaderLock lock(mutex_);
  std::optional<Handles::Target> target = handles_.targetOf(handlePtr);
  if (!target) return fail(ErrorCode::InvalidArgument, "device_dlclose: invalid handle");
  // The global scope's handle, or a view: nothing to drop.
  if (handlePtr == handles_.global() || target->handle != handlePtr) return llvm::Error::success();
  Handle *handle = handles_.find(handlePtr);
  // Only a DEVDL_NODELETE handle stays with no reference; closing it then is an error, as
  // dlclose of a NODELETE object already closed is ("shared object not open").
  if (handle->references == 0)
    return fail(ErrorCode::InvalidArgument,
                "device_dlclose: " + handle->path + " is not open (DEVDL_NODELETE keeps it loaded)");
  handles_.dropReference(*handle);
  return llvm::Error::success();
}

llvm::Error Loader::specialize(void *handlePtr, unsigned specId, std::string_view value) {
  LoaderLock lock(mutex_);
  std::optional<Handles::Target> target = handles_.targetOf(handlePtr);
  const Handle *handle = target ? handles_.find(target->handle) : nullptr;  // of the handle, on every device
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
  Generation::move();
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