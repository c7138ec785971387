// The host's objects and DEVDL_PRELOAD applied to the loader's handles and scopes.
#include "loader/process_scan.h"

#include "host/preloads.h"
#include "loader/files.h"
#include "support/debug.h"
#include "support/environment.h"

#include "devdl.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/Support/FileSystem.h>

#include <algorithm>
#include <cstdlib>
#include <set>

namespace devdl {

using host::sameLoad;

void ProcessScan::scan(LoaderLock &lock) {
  View view = observe(lock);
  // The references that keep new objects loaded while their images are added go once the mutex
  // does: closing an object runs its destructors, which may call devdl.
  for (host::ProcessView::Object &object : view.host.objects)
    if (object.reference) lock.mutex().destroyLater(std::move(object.reference));
  apply(std::move(view));
  candidacies_.decide(lock);
  globalScope_.reportWaiting();
}

ProcessScan::View ProcessScan::observe(LoaderLock &lock) {
  // What the loader knows, copied, so that the host loader is asked without the mutex.
  // Known global (told so), and the others: asked again, as promotion may have made them global.
  host::KnownObjects known;
  for (const auto &[address, bundle] : bundles_)
    (bundle.global && bundle.told ? known.global : known.others).push_back(bundle.found);
  known.generation = scannedGeneration_;
  known.listed = scanned_;
  const bool preloaded = preloaded_;
  const std::vector<FileIdentity> open = handles_.identities();
  lock.letGo();
  View view{host::observeProcess(known), {}, {}, std::nullopt};
  for (host::ProcessView::Object &object : view.host.objects) {
    std::optional<std::vector<NewImage>> &images = view.images.emplace_back();
    std::vector<std::vector<OpenedFile>> &needed = view.needed.emplace_back();
    if (!object.images) continue;
    images.emplace();
    for (DeviceImage &image : *object.images)
      images->push_back(candidacies_.accept(std::move(image), /*mayOpenDevice=*/false));
    object.images.reset();
    needed = readNeededOf(object.found, *images, open);
  }
  if (!preloaded) view.preloads = readPreloads();
  lock.takeAgain();
  return view;
}

void ProcessScan::apply(View view) {
  // Another thread may have applied a later view meanwhile: an earlier one says nothing new.
  if (scanned_ && view.host.generation < scannedGeneration_) return;
  applyObjects(view);
  if (!preloaded_ && view.preloads) applyPreloads(*view.preloads);
}

void ProcessScan::applyObjects(View &view) {
  const size_t before = bundles_.size();
  if (view.host.listed) {
    scanned_ = true;
    scannedGeneration_ = view.host.generation;
    followUnloads(view.host);
  }
  bool changed = false;
  for (size_t o = 0; o < view.host.objects.size(); ++o) {
    host::ProcessView::Object &object = view.host.objects[o];
    auto it = bundles_.find(object.found.bytes.data());
    if (it == bundles_.end() || !sameLoad(it->second.found, object.found)) {
      if (!view.images[o]) continue;  // not read: known when observed, unloaded since
      it = addBundle(object, *view.images[o], view.needed[o]);
      changed = true;
    } else if (view.host.listed && it->second.found.needs != object.found.needs) {
      it->second.found.needs = std::move(object.found.needs);
      changed = true;
    }
    followGlobal(it->second, object);
  }
  if (changed || bundles_.size() != before) makeLocalScopes();
}

void ProcessScan::makeLocalScopes() {
  for (auto &[address, bundle] : bundles_) {
    LocalScope local;
    auto add = [&](uint32_t id) {
      if (!llvm::is_contained(local.images, id)) local.add(images_[id].image, id);
    };
    // An object's images, then the files they need (their handles' scopes: each file, then what
    // it needs), as a host object's DT_NEEDED libraries come after it.
    auto addObject = [&](const std::string &object, uintptr_t base) {
      for (const auto &[at, other] : bundles_)
        if (other.found.object == object && other.found.base == base) llvm::for_each(other.images, add);
      for (const auto &[at, other] : bundles_)
        if (other.found.object == object && other.found.base == base)
          for (Handle *needed : other.needed)
            if (handles_.find(needed)) llvm::for_each(needed->local.images, add);
    };
    llvm::for_each(bundle.images, add);
    addObject(bundle.found.object, bundle.found.base);
    for (const host::ObjectLoad &needed : bundle.found.needs) addObject(needed.path, needed.base);
    bundle.local = std::move(local);
  }
  Generation::move();
}

void ProcessScan::followUnloads(const host::ProcessView &host) {
  // Their bundles are gone from memory (another object may be at the same address now).
  for (auto it = bundles_.begin(); it != bundles_.end();) {
    const bool still = llvm::any_of(host.objects, [&](const host::ProcessView::Object &o) {
      return sameLoad(o.found, it->second.found);
    });
    if (still) {
      ++it;
      continue;
    }
    handles_.dropImages(it->second.images);
    for (Handle *needed : it->second.needed)
      if (handles_.find(needed)) handles_.dropReference(*needed);
    it = bundles_.erase(it);
  }
}

std::map<const uint8_t *, ProcessScan::Bundle>::iterator ProcessScan::addBundle(
    host::ProcessView::Object &object, std::vector<NewImage> &images, std::vector<std::vector<OpenedFile>> &needed) {
  const uint8_t *address = object.found.bytes.data();
  Bundle &bundle = bundles_[address];
  bundle.found = std::move(object.found);
  for (size_t i = 0; i < images.size(); ++i) {
    const uint32_t id = images_.add(std::move(images[i].image), bundle.found.object, static_cast<unsigned>(i), nullptr,
                                    &bundle.local, &bundle.found);
    candidacies_.arrived(id, std::move(images[i].acceptance));
    bundle.images.push_back(id);
  }
  addNeeded(bundle, needed);
  return bundles_.find(address);
}

void ProcessScan::followGlobal(Bundle &bundle, const host::ProcessView::Object &object) {
  // An object opened RTLD_LOCAL joins the global scope when the host promotes it. One taken as
  // global without being told so leaves it when it can be told it is not (the object whose
  // exports hid its own has gone).
  bundle.told = object.told;
  if (!bundle.global && object.global) {
    bundle.global = true;
    globalScope_.join(bundle.images);
    // Its needed files with it (the process's images resolve in the global scope alone). They
    // stay there if it leaves: another may have come to rely on them, as with RTLD_GLOBAL.
    Handles::Open promotion(handles_);
    for (Handle *needed : bundle.needed)
      if (handles_.find(needed)) handles_.makeGlobal(*needed, promotion.record());
    promotion.keep();  // the host's, which devdl follows
  } else if (bundle.global && !object.global) {
    bundle.global = false;
    globalScope_.leave(bundle.images);
  }
}

void ProcessScan::applyPreloads(std::vector<View::Preload> &preloads) {
  // Right after the executable and the LD_PRELOAD objects, before the libraries: the images of
  // those objects are the first in the global scope at this point.
  std::set<std::string> hostPreloads;
  for (const std::string &item : host::preloadList(std::getenv("LD_PRELOAD"))) hostPreloads.insert(item);
  const std::span<const uint32_t> order = scopes_.globalOrder();
  size_t position = 0;
  for (const auto &[address, bundle] : bundles_)
    if (bundle.found.object.empty() || hostPreloads.count(bundle.found.object))
      for (uint32_t id : bundle.images) position = std::max<size_t>(position, llvm::find(order, id) - order.begin() + 1);
  for (View::Preload &preload : preloads) {
    Handle *handle = handleFor(preload, DEVDL_LAZY | DEVDL_GLOBAL | DEVDL_NODELETE, "DEVDL_PRELOAD: ");
    if (!handle) continue;
    handle->nodelete = true;
    // The images were appended to the global scope: they go to their place.
    scopes_.place(handle->images, position, images_.pointers());
    position += handle->images.size();
    if (Debug::get().on(Debug::Libs)) Debug::get().print("preloaded " + handle->path);
  }
  preloaded_ = true;
  globalScope_.reportJoins();
  Generation::move();
  // The process's first scope is reported once its images' candidacies are decided (scan).
  globalScope_.reportLater(scopes_.globalOrder());
}

Handle *ProcessScan::handleFor(std::vector<OpenedFile> &batch, int flags, const std::string &what) {
  Handles::Open transaction(handles_);
  if (Handle *handle = handles_.find(batch.front().identity)) {
    handles_.reference(*handle, transaction.record());
    if (flags & DEVDL_GLOBAL) handles_.makeGlobal(*handle, transaction.record());
    transaction.keep();
    return handle;
  }
  auto added = handles_.add(batch, flags, transaction.record());
  if (added && added->settled()) {
    transaction.keep();
    return **added;
  }
  Debug::get().warn(what + (added ? batch.front().name + ": a file it needs was closed meanwhile"
                                  : llvm::toString(added.takeError())) +
                    ": ignored");
  return nullptr;
}

std::vector<std::vector<OpenedFile>> ProcessScan::readNeededOf(const host::LoadedBundle &object,
                                                               const std::vector<NewImage> &images,
                                                               const std::vector<FileIdentity> &open) const {
  std::vector<std::vector<OpenedFile>> needed;
  std::string file;  // $ORIGIN's: the object's, the executable's for its images; asked only for a need
  for (const NewImage &image : images)
    for (std::string_view name : image.image.neededFiles()) {
      if (file.empty())
        file = object.object.empty() ? llvm::sys::fs::getMainExecutable(nullptr, nullptr) : object.object;
      // The host loaded the object whatever devdl finds: what cannot be loaded is said and passed
      // over, as DEVDL_PRELOAD's files are.
      const std::string runPath(image.image.runPath());
      const Needer needer{file, !file.empty(), runPath};
      auto opened = openNamedFile(std::string(name).c_str(), &needer);
      if (!opened) {
        Debug::get().warn(llvm::toString(opened.takeError()) + ": ignored");
        continue;
      }
      const FileIdentity identity = FileIdentity::of(*opened);
      if (llvm::any_of(needed, [&](const auto &batch) { return batch.front().identity == identity; })) continue;
      auto first = reader_.readOpened(std::move(*opened), open, /*mayOpenDevice=*/false);
      auto files = first ? reader_.readNeeded(std::move(*first), open, /*mayOpenDevice=*/false) : first.takeError();
      if (!files) {
        Debug::get().warn(llvm::toString(files.takeError()) + ": ignored");
        continue;
      }
      needed.push_back(std::move(*files));
    }
  return needed;
}

void ProcessScan::addNeeded(Bundle &bundle, std::vector<std::vector<OpenedFile>> &needed) {
  for (std::vector<OpenedFile> &batch : needed) {
    if (Handle *handle = handleFor(batch, DEVDL_LAZY, "")) bundle.needed.push_back(handle);
  }
}

std::vector<ProcessScan::View::Preload> ProcessScan::readPreloads() const {
  std::vector<View::Preload> preloads;
  const char *list = devdlVariable("DEVDL_PRELOAD");
  // As with LD_PRELOAD, a file that cannot be loaded is reported and skipped.
  for (const std::string &item : host::preloadList(list)) {
    auto opened = openNamedFile(item.c_str());
    // Decided later if that would open a device: the first scan may run in a host constructor.
    auto first = opened ? reader_.readOpened(std::move(*opened), {}, /*mayOpenDevice=*/false) : opened.takeError();
    auto files = first ? reader_.readNeeded(std::move(*first), {}, /*mayOpenDevice=*/false) : first.takeError();
    if (!files) {
      Debug::get().warn("DEVDL_PRELOAD: " + llvm::toString(files.takeError()) + ": ignored");
      continue;
    }
    preloads.push_back(std::move(*files));
  }
  return preloads;
}

std::optional<ProcessScan::CudaObjects> ProcessScan::cudaObjectsAt(const void *address) const {
  const auto at = reinterpret_cast<uintptr_t>(address);
  for (const auto &[where, bundle] : bundles_) {
    if (bundle.found.carrier != host::LoadedBundle::Carrier::CudaObjects) continue;
    for (const auto &[begin, end] : bundle.found.segments)
      if (at >= begin && at < end) return CudaObjects{bundle.found.object, bundle.images, bundle.found.withProgram};
  }
  return std::nullopt;
}

}  // namespace devdl
