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


LoaderParts::LoaderParts(LoaderOptions options)
    : devices(options.backends, std::move(options.backendChoice), options.hostLockWait),
      places(devices),
      candidacies(images, devices, places),
      globalScope(images, scopes, candidacies),
      programs({images, scopes, places, devices, mutex, [this](LoaderLock &lock) { scan.scan(lock); }}, options.store,
               options.hostLockWait),
      handles(images, scopes, globalScope, candidacies, programs),
      reader(candidacies, options.summaries),
      opener({images, places, candidacies, programs, handles, reader}),
      scan(images, scopes, globalScope, handles, candidacies, reader),
      lookups({images, scopes, handles, candidacies, programs, places, scan}) {}

Loader::Loader(Options options) : parts_(std::move(options)) { Generation::move(); }

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
    LoaderLock lock(parts_.mutex);
    if (!parts_.handles.targetOf(pointer)) return fail(ErrorCode::InvalidArgument, "device_dlview: invalid handle");
  }
  // The device is found, or attached, with the mutex let go: that calls the driver.
  auto device = parts_.devices.forNative(native);
  if (!device) return fail(ErrorCode::NotFound, "device_dlview: " + llvm::toString(device.takeError()));
  LoaderLock lock(parts_.mutex);
  std::optional<Handles::Target> target = parts_.handles.targetOf(pointer);
  if (!target) return fail(ErrorCode::InvalidArgument, "device_dlview: invalid handle");
  const unsigned place = parts_.places.placeOf(*device);
  if (View *view = parts_.handles.viewOf(target->handle, place)) return view;
  // A handle opened DEVDL_NOW is linked on the view's device now too: an error leaves no view.
  if (Handle *handle = parts_.handles.find(target->handle); handle && handle->linkedNow) {
    if (llvm::Error err = parts_.opener.linkNow(lock, *handle, place)) return err;
    if (!parts_.handles.targetOf(pointer))
      return fail(ErrorCode::NotFound, "device_dlview: the handle was closed meanwhile");
    if (View *view = parts_.handles.viewOf(target->handle, place)) return view;
  }
  return parts_.handles.addView(target->handle, place);
}

llvm::Expected<void *> Loader::open(const char *name, int flags) {
  if (!name) {
    LoaderLock lock(parts_.mutex);
    parts_.scan.scan(lock);
    return parts_.handles.global();
  }
  if ((flags & (DEVDL_LAZY | DEVDL_NOW)) == 0)
    return fail(ErrorCode::InvalidArgument, "device_dlopen: flags must include DEVDL_LAZY or DEVDL_NOW");
  auto opened = openNamedFile(name);
  if (!opened) return opened.takeError();
  // Shared: the images taken from its summary read it when they are linked.
  const auto file = std::make_shared<const RegularFile>(std::move(*opened));
  LoaderLock lock(parts_.mutex);
  parts_.scan.scan(lock);
  auto handle = parts_.opener.open(lock, FileIdentity::of(*file), flags, file->path(), file,
                                   [&] { return parts_.reader.readFile(file); });
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
  LoaderLock lock(parts_.mutex);
  parts_.scan.scan(lock);
  auto handle = parts_.opener.open(lock, {0, 0, data, size, 0}, flags, label, nullptr, read);
  if (!handle) return handle.takeError();
  return *handle;
}

llvm::Error Loader::attach(const devdl_native &native) {
  const backend::BackendEntry *row = parts_.devices.entry(native.backend);
  if (!row || !row->attach)
    return fail(ErrorCode::Unsupported, "device_dlattach: backend " + std::to_string(native.backend) +
                                            " is not in this build (" + parts_.devices.names(/*inBuild=*/true) +
                                            " are)");
  auto attached = row->attach(native);
  if (!attached) return fail(ErrorCode::NotFound, "device_dlattach: " + llvm::toString(attached.takeError()));
  LoaderLock lock(parts_.mutex);
  if (backend::Device *current = parts_.devices.opened(native.backend)) {
    devdl_native now{sizeof now, 0, nullptr, nullptr, nullptr};
    current->native(now);
    if (now.device == native.device && now.context == native.context) return llvm::Error::success();
    if (parts_.programs.cache().anyOn(current))
      return fail(ErrorCode::InvalidArgument, "device_dlattach: programs are already linked for " + current->name());
  }
  parts_.devices.replace(std::move(*attached));
  // Another device may take other images: each one's candidacy is decided again, with the mutex let go.
  for (uint32_t id = 0; id < parts_.images.end(); ++id)
    if (parts_.images.contains(id) && parts_.images[id].loaded) parts_.images[id].programs.clear();
  parts_.candidacies.undecideAll();
  Generation::move();
  parts_.candidacies.decide(lock);
  return llvm::Error::success();
}

llvm::Error Loader::close(void *handlePtr) {
  LoaderLock lock(parts_.mutex);
  std::optional<Handles::Target> target = parts_.handles.targetOf(handlePtr);
  if (!target) return fail(ErrorCode::InvalidArgument, "device_dlclose: invalid handle");
  // The global scope's handle, or a view: nothing to drop.
  if (handlePtr == parts_.handles.global() || target->handle != handlePtr) return llvm::Error::success();
  Handle *handle = parts_.handles.find(handlePtr);
  // Only a DEVDL_NODELETE handle stays with no reference; closing it then is an error, as
  // dlclose of a NODELETE object already closed is ("shared object not open").
  if (handle->references == 0)
    return fail(ErrorCode::InvalidArgument,
                "device_dlclose: " + handle->path + " is not open (DEVDL_NODELETE keeps it loaded)");
  parts_.handles.dropReference(*handle);
  return llvm::Error::success();
}

llvm::Error Loader::specialize(void *handlePtr, unsigned specId, std::string_view value) {
  LoaderLock lock(parts_.mutex);
  std::optional<Handles::Target> target = parts_.handles.targetOf(handlePtr);
  const Handle *handle = target ? parts_.handles.find(target->handle) : nullptr;  // of the handle, on every device
  if (!handle) return fail(ErrorCode::InvalidArgument, "device_dlspecialize: invalid handle");
  if (value.size() != 1 && value.size() != 2 && value.size() != 4 && value.size() != 8)
    return fail(ErrorCode::InvalidArgument, handle->path + ": specialization constant " + std::to_string(specId) +
                                                ": a value of " + std::to_string(value.size()) +
                                                " bytes (1, 2, 4 or 8 are)");
  bool declared = false;
  std::vector<uint32_t> specialized;
  for (uint32_t id : handle->images) {
    LoadedImage &loaded = parts_.images[id];
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
  for (uint32_t id = 0; id < parts_.images.end(); ++id)
    if (parts_.images.contains(id))
      for (cache::LinkedProgram *&program : parts_.images[id].programs)
        if (program && llvm::any_of(specialized, [&](uint32_t s) { return program->holds(s); })) program = nullptr;
  Generation::move();
  return llvm::Error::success();
}

llvm::Error Loader::native(devdl_native &out) {
  // The devices open themselves without the loader's lock.
  const int which = out.backend ? out.backend : parts_.devices.defaultBackend();
  if (!parts_.devices.entry(which))
    return fail(ErrorCode::InvalidArgument, "device_dlnative: unknown backend " + std::to_string(which));
  auto dev = parts_.devices.device(which);
  if (!dev) return dev.takeError();
  (*dev)->native(out);
  return llvm::Error::success();
}

}  // namespace devdl