// The process's own images applied to the loader: the host's objects as a view of them found
// them (host/process_view.h: the bundles of the objects loaded now, and the offload tables of
// those DPC++ built, in link-map order, and whether each is in the host's global scope), and
// DEVDL_PRELOAD's images, which take their place after the executable's and LD_PRELOAD's. The
// host loader is asked with the loader's lock let go; what it said is applied under the lock.
#include "host/loaded_bundles.h"
#include "host/process_view.h"
#include "loader/files.h"
#include "loader/loader.h"
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

void Loader::scanProcess(Lock &lock) {
  ProcessView view = observeProcess(lock);
  applyProcess(std::move(view));
  decideCandidacies(lock);
  if (!unreported_.empty()) {
    const std::vector<uint32_t> ids = std::move(unreported_);
    unreported_.clear();
    reportDuplicates(ids);
  }
}

Loader::ProcessView Loader::observeProcess(Lock &lock) {
  // What the loader knows, copied, so that the host loader is asked without the lock.
  // Known global (told so), and the others: asked again, as promotion may have made them global.
  host::KnownObjects known;
  for (const auto &[address, pb] : processBundles_) (pb.global && pb.told ? known.global : known.others).push_back(pb.found);
  known.generation = scannedGeneration_;
  known.listed = scanned_;
  const bool preloaded = preloaded_;
  std::vector<Handle::Identity> open;
  for (const auto &handle : handles_) open.push_back(handle->identity);
  lock.release();
  ProcessView view{host::observeProcess(known), {}, {}, std::nullopt};
  for (host::ProcessView::Object &object : view.host.objects) {
    std::optional<std::vector<NewImage>> &images = view.images.emplace_back();
    std::vector<std::vector<OpenedFile>> &needed = view.needed.emplace_back();
    if (!object.images) continue;
    images.emplace();
    for (DeviceImage &image : *object.images) images->push_back(withCandidacy(std::move(image), /*mayOpenDevice=*/false));
    object.images.reset();
    needed = readNeededOf(object.found, *images, open);
  }
  if (!preloaded) view.preloads = readPreloads();
  lock.acquire();
  return view;
}

void Loader::applyProcess(ProcessView view) {
  // Another thread may have applied a later view meanwhile: an earlier one says nothing new.
  if (scanned_ && view.host.generation < scannedGeneration_) return;
  if (view.host.listed) {
    scanned_ = true;
    scannedGeneration_ = view.host.generation;
    // Objects the host has unloaded: their bundles are gone from memory (another object may be
    // at the same address now).
    for (auto it = processBundles_.begin(); it != processBundles_.end();) {
      const bool still = llvm::any_of(view.host.objects, [&](const host::ProcessView::Object &o) {
        return sameLoad(o.found, it->second.found);
      });
      if (still) {
        ++it;
        continue;
      }
      dropImages(it->second.images);
      for (Handle *needed : it->second.needed)
        if (findHandle(needed)) release(needed);
      it = processBundles_.erase(it);
    }
  }
  for (size_t o = 0; o < view.host.objects.size(); ++o) {
    host::ProcessView::Object &object = view.host.objects[o];
    std::optional<std::vector<NewImage>> &images = view.images[o];
    auto it = processBundles_.find(object.found.bytes.data());
    if (it == processBundles_.end() || !sameLoad(it->second.found, object.found)) {
      if (!images) continue;  // not read: known when observed, unloaded since
      ProcessBundle &pb = processBundles_[object.found.bytes.data()];
      pb.found = std::move(object.found);
      for (size_t i = 0; i < images->size(); ++i) {
        NewImage &image = (*images)[i];
        const uint32_t id =
            images_.add(std::move(image.image), pb.found.object, static_cast<unsigned>(i), nullptr, &pb.found);
        images_[id].candidacy = image.candidacy;
        images_[id].whyNot = std::move(image.whyNot);
        if (image.candidacy == Candidacy::Undecided) undecided_.push_back(id);
        pb.images.push_back(id);
      }
      addNeeded(pb, view.needed[o]);
      it = processBundles_.find(pb.found.bytes.data());
    }
    // An object opened RTLD_LOCAL joins the global scope when the host promotes it. One taken
    // as global without being told so leaves it when it can be told it is not (the object whose
    // exports hid its own has gone).
    ProcessBundle &pb = it->second;
    pb.told = object.told;
    if (!pb.global && object.global) {
      pb.global = true;
      joinGlobalScope(pb.images);
      // Its needed files with it (the process's images resolve in the global scope alone). They
      // stay there if it leaves: another may have come to rely on them, as with RTLD_GLOBAL.
      for (Handle *needed : pb.needed)
        if (findHandle(needed)) makeGlobal(*needed);
    } else if (pb.global && !object.global) {
      pb.global = false;
      scopes_.leave(pb.images, images_.pointers());
      changed();
    }
  }
  if (!preloaded_ && view.preloads) {
    // Right after the executable and the LD_PRELOAD objects, before the libraries: the images
    // of those objects are the first in the global scope at this point.
    std::set<std::string> hostPreloads;
    for (const std::string &item : preloadList(std::getenv("LD_PRELOAD"))) hostPreloads.insert(item);
    const std::span<const uint32_t> order = scopes_.globalOrder();
    size_t position = 0;
    for (const auto &[address, pb] : processBundles_)
      if (pb.found.object.empty() || hostPreloads.count(pb.found.object))
        for (uint32_t id : pb.images)
          position = std::max<size_t>(position, llvm::find(order, id) - order.begin() + 1);
    for (ProcessView::Preload &preload : *view.preloads) {
      Handle *handle = findHandle(preload.front().identity);
      if (handle) {
        ++handle->references;
        handle->nodelete = true;
        makeGlobal(*handle);
      } else {
        auto added = addHandles(preload, DEVDL_LAZY | DEVDL_GLOBAL | DEVDL_NODELETE);
        if (!added || !*added) {
          Debug::get().warn("DEVDL_PRELOAD: " +
                            (added ? preload.front().name + ": a file it needs was closed meanwhile"
                                   : llvm::toString(added.takeError())) +
                            ": ignored");
          continue;
        }
        handle = *added;
      }
      // The images were appended to the global scope: they go to their place.
      scopes_.place(handle->images, position, images_.pointers());
      position += handle->images.size();
      if (Debug::get().on(Debug::Libs)) Debug::get().print("preloaded " + handle->path);
    }
    preloaded_ = true;
    changed();
    // The process's first scope is reported once its images' candidacies are decided (scanProcess).
    unreported_.insert(unreported_.end(), scopes_.globalOrder().begin(), scopes_.globalOrder().end());
  }
}

std::vector<std::vector<Loader::OpenedFile>> Loader::readNeededOf(const host::LoadedBundle &object,
                                                                    const std::vector<NewImage> &images,
                                                                    const std::vector<Handle::Identity> &open) {
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
      const Handle::Identity identity = Handle::Identity::of(*opened);
      if (llvm::any_of(needed, [&](const auto &batch) { return batch.front().identity == identity; })) continue;
      auto first = readOpened(std::move(*opened), open, /*mayOpenDevice=*/false);
      auto files = first ? readNeeded(std::move(*first), open, /*mayOpenDevice=*/false) : first.takeError();
      if (!files) {
        Debug::get().warn(llvm::toString(files.takeError()) + ": ignored");
        continue;
      }
      needed.push_back(std::move(*files));
    }
  return needed;
}

void Loader::addNeeded(ProcessBundle &pb, std::vector<std::vector<OpenedFile>> &needed) {
  for (std::vector<OpenedFile> &batch : needed) {
    Handle *handle = findHandle(batch.front().identity);
    if (handle) {
      ++handle->references;
    } else {
      auto added = addHandles(batch, DEVDL_LAZY);
      if (!added || !*added) {
        Debug::get().warn((added ? batch.front().name + ": a file it needs was closed meanwhile"
                                 : llvm::toString(added.takeError())) +
                          ": ignored");
        continue;
      }
      handle = *added;
    }
    pb.needed.push_back(handle);
  }
}

std::vector<Loader::ProcessView::Preload> Loader::readPreloads() {
  std::vector<ProcessView::Preload> preloads;
  const char *list = devdlVariable("DEVDL_PRELOAD");
  // As with LD_PRELOAD, a file that cannot be loaded is reported and skipped.
  for (const std::string &item : preloadList(list)) {
    auto opened = openNamedFile(item.c_str());
    // Decided later if that would open a device: the first scan may run in a host constructor.
    auto first = opened ? readOpened(std::move(*opened), {}, /*mayOpenDevice=*/false) : opened.takeError();
    auto files = first ? readNeeded(std::move(*first), {}, /*mayOpenDevice=*/false) : first.takeError();
    if (!files) {
      Debug::get().warn("DEVDL_PRELOAD: " + llvm::toString(files.takeError()) + ": ignored");
      continue;
    }
    preloads.push_back(std::move(*files));
  }
  return preloads;
}

void Loader::reportDuplicates(std::span<const uint32_t> ids) {
  if (!Debug::get().on(Debug::Symbols)) return;
  for (uint32_t id : ids) {
    if (!images_.contains(id) || !images_[id].loaded) continue;
    if (images_[id].candidacy == Candidacy::Undecided) {
      unreported_.push_back(id);
      continue;
    }
    for (const Symbol &s : images_[id].image.symbols) {
      if (s.kind == SymbolKind::Import || !planner().isCandidate(id)) continue;
      const Definition *first =
          firstCandidate(scopes_.global().definitions(s.name), [&](uint32_t image) { return planner().isCandidate(image); },
                         linkFamily(images_[id].image.format));
      if (first && first->image != id)
        Debug::get().print("duplicate definition of `" + std::string(s.name) + "` in " + images_[id].label +
                           " (the one in " + images_[first->image].label + " is used)");
    }
  }
}

}  // namespace devdl
