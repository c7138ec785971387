// The process's own images: the bundles of the host objects loaded now, and the offload tables of
// those DPC++ built, in link-map order, and
// whether each object is in the host's global scope; DEVDL_PRELOAD's images take their place
// after the executable's and LD_PRELOAD's. The host loader is asked with the loader's lock let
// go; what it said is applied under the lock.
#include "bundle/loaded_bundles.h"
#include "support/environment.h"
#include "loader/loader.h"
#include "loader/files.h"
#include "support/debug.h"

#include "devdl.h"

#include <llvm/ADT/STLExtras.h>


#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>

namespace devdl {

namespace {

bool sameLoad(const bundle::LoadedBundle &a, const bundle::LoadedBundle &b) {
  return a.bytes.data() == b.bytes.data() && a.bytes.size() == b.bytes.size() && a.base == b.base &&
         a.object == b.object;
}

}  // namespace

void Loader::scanProcess(Lock &lock) {
  ProcessView view = observeProcess(lock);
  applyProcess(std::move(view));
  judgeUndecided(lock);
  if (!unreported_.empty()) {
    const std::vector<uint32_t> ids = std::move(unreported_);
    unreported_.clear();
    reportDuplicates(ids);
  }
}

Loader::ProcessView Loader::observeProcess(Lock &lock) {
  // What the loader knows, copied, so that the host loader is asked without the lock.
  // Known global (told so), and the others: asked again, as promotion may have made them global.
  std::vector<bundle::LoadedBundle> global, local;
  for (const auto &[address, pb] : processBundles_) (pb.global && pb.told ? global : local).push_back(pb.found);
  const uint64_t scanned = scannedGeneration_;
  const bool wasScanned = scanned_, preloaded = preloaded_;
  lock.release();
  ProcessView view;
  // Once scanned, the objects are listed again only when the host loaded or unloaded one since.
  if (wasScanned) view.generation = bundle::loadedObjectsGeneration();
  if (wasScanned && view.generation == scanned) {
    // Nothing loaded or unloaded; only a promotion to the global scope (a second dlopen with
    // RTLD_GLOBAL) can have changed what is global, and that counts as neither.
    for (bundle::LoadedBundle &found : local) {
      const std::optional<bool> global = bundle::inGlobalScope(found);
      view.objects.push_back({std::move(found), global.value_or(true), global.has_value(), std::nullopt});
    }
  } else {
    view.listed = true;
    auto in = [](const std::vector<bundle::LoadedBundle> &list, const bundle::LoadedBundle &found) {
      return llvm::any_of(list, [&](const bundle::LoadedBundle &k) { return sameLoad(k, found); });
    };
    bundle::LoadedObjects listed = bundle::findLoadedBundles();
    view.generation = listed.generation;  // of the list itself, whatever was loaded meanwhile
    for (bundle::LoadedBundle &found : listed.bundles) {
      ProcessView::Object object{std::move(found), false, true, std::nullopt};
      const bool knownGlobal = in(global, object.found), known = knownGlobal || in(local, object.found);
      // Once told global, an object stays so while it is loaded: only the others are asked.
      // One that cannot be told is taken as global, as the objects loaded with the program are.
      const std::optional<bool> asked = knownGlobal ? std::optional<bool>(true) : bundle::inGlobalScope(object.found);
      object.global = asked.value_or(true);
      object.told = asked.has_value();
      if (!known) {
        // Read while a reference keeps the object loaded; its images keep copies of their
        // strings, and only their bytes stay in the object, read under references again.
        auto reference = bundle::ObjectReference::take(object.found.object, object.found.base);
        if (reference || object.found.object.empty()) {
          // An object DPC++ built: its tables are read from its file, while it is loaded.
          auto images = object.found.offloadTables
                            ? readDpcppImagesOfFile(object.found.object.empty() ? "/proc/self/exe" : object.found.object)
                            : readBundleImages(object.found.bytes, nullptr);
          object.images.emplace();
          if (images)
            for (DeviceImage &image : *images) {
              image.ownStrings();
              object.images->push_back(judge(std::move(image), /*mayOpenDevice=*/false));
            }
          else if (Debug::get().on(Debug::Libs))  // a broken bundle in some object stops no other
            Debug::get().print("images of " + object.found.object + " not read: " + llvm::toString(images.takeError()));
          else
            llvm::consumeError(images.takeError());
        }
      }
      view.objects.push_back(std::move(object));
    }
  }
  if (!preloaded) view.preloads = readPreloads();
  lock.acquire();
  return view;
}

void Loader::applyProcess(ProcessView view) {
  // Another thread may have applied a later view meanwhile: an earlier one says nothing new.
  if (scanned_ && view.generation < scannedGeneration_) return;
  if (view.listed) {
    scanned_ = true;
    scannedGeneration_ = view.generation;
    // Objects the host has unloaded: their bundles are gone from memory (another object may be
    // at the same address now).
    for (auto it = processBundles_.begin(); it != processBundles_.end();) {
      const bool still = llvm::any_of(view.objects, [&](const ProcessView::Object &o) {
        return sameLoad(o.found, it->second.found);
      });
      if (still) {
        ++it;
        continue;
      }
      dropImages(it->second.images);
      it = processBundles_.erase(it);
    }
  }
  for (ProcessView::Object &object : view.objects) {
    auto it = processBundles_.find(object.found.bytes.data());
    if (it == processBundles_.end() || !sameLoad(it->second.found, object.found)) {
      if (!object.images) continue;  // not read: known when observed, unloaded since
      ProcessBundle &pb = processBundles_[object.found.bytes.data()];
      pb.found = std::move(object.found);
      for (size_t i = 0; i < object.images->size(); ++i) {
        NewImage &image = (*object.images)[i];
        const uint32_t id =
            images_.add(std::move(image.image), pb.found.object, static_cast<unsigned>(i), nullptr, &pb.found);
        images_[id].candidacy = image.candidacy;
        images_[id].whyNot = std::move(image.whyNot);
        if (image.candidacy == LoadedImage::Candidacy::Unknown) undecided_.push_back(id);
        pb.images.push_back(id);
      }
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
      Handle *handle = findHandle(preload.identity);
      if (handle) {
        ++handle->references;
        handle->nodelete = true;
        if (!handle->global) {
          handle->global = true;
          joinGlobalScope(handle->images);
        }
      } else {
        auto added = addHandle(preload.path, std::move(preload.images), preload.identity,
                               DEVDL_LAZY | DEVDL_GLOBAL | DEVDL_NODELETE);
        if (!added) {
          std::fprintf(stderr, "devdl: DEVDL_PRELOAD: %s: ignored\n", llvm::toString(added.takeError()).c_str());
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
    // The process's first scope is reported once its images are judged (scanProcess).
    unreported_.insert(unreported_.end(), scopes_.globalOrder().begin(), scopes_.globalOrder().end());
  }
}

std::vector<Loader::ProcessView::Preload> Loader::readPreloads() {
  std::vector<ProcessView::Preload> preloads;
  const char *list = devdlVariable("DEVDL_PRELOAD");
  // As with LD_PRELOAD, a file that cannot be loaded is reported and skipped.
  for (const std::string &item : preloadList(list)) {
    auto opened = openNamedFile(item.c_str());
    const auto file = opened ? std::make_shared<const RegularFile>(std::move(*opened)) : nullptr;
    auto read = file ? readFile(file) : opened.takeError();
    if (!read) {
      std::fprintf(stderr, "devdl: DEVDL_PRELOAD: %s: ignored\n", llvm::toString(read.takeError()).c_str());
      continue;
    }
    const Handle::Identity identity{file->status().st_dev, file->status().st_ino, nullptr, 0};
    std::string name = read->name;
    // Judged later if that would open a device: the first scan may run in a host constructor.
    preloads.push_back({std::move(name), identity, prepare(std::move(*read), /*mayOpenDevice=*/false)});
  }
  return preloads;
}

void Loader::reportDuplicates(std::span<const uint32_t> ids) {
  if (!Debug::get().on(Debug::Symbols)) return;
  for (uint32_t id : ids) {
    if (!images_.contains(id) || !images_[id].loaded) continue;
    if (images_[id].candidacy == LoadedImage::Candidacy::Unknown) {
      unreported_.push_back(id);
      continue;
    }
    for (const Symbol &s : images_[id].image.symbols) {
      if (s.kind == SymbolKind::Import || !deviceTakes(id)) continue;
      const Definition *first =
          firstCandidate(scopes_.global().definitions(s.name), [&](uint32_t image) { return deviceTakes(image); },
                         linkFamily(images_[id].image.format));
      if (first && first->image != id)
        Debug::get().print("duplicate definition of `" + std::string(s.name) + "` in " + images_[id].label +
                           " (the one in " + images_[first->image].label + " is used)");
    }
  }
}

}  // namespace devdl
