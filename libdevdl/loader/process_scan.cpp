// The process's own images: the bundles of the host objects loaded now, in link-map order, and
// whether each object is in the host's global scope; DEVDL_PRELOAD's images take their place
// after the executable's and LD_PRELOAD's.
#include "bundle/loaded_bundles.h"
#include "loader/loader.h"
#include "loader/search_path.h"
#include "support/debug.h"

#include "devdl.h"

#include <llvm/ADT/STLExtras.h>

#include <sys/auxv.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>

namespace devdl {

llvm::Error Loader::scanProcess() {
  const uint64_t generation = bundle::loadedObjectsGeneration();
  if (generation == scannedGeneration_) {
    // Nothing loaded or unloaded; only a promotion to the global scope (a second dlopen with
    // RTLD_GLOBAL) can have changed what is global, and that counts as neither.
    for (auto &[address, pb] : processBundles_)
      if (!pb.global && bundle::inGlobalScope(pb.found)) {
        pb.global = true;
        joinGlobalScope(pb.images);
      }
    return llvm::Error::success();
  }
  scannedGeneration_ = generation;
  const std::vector<bundle::LoadedBundle> loaded = bundle::findLoadedBundles();
  // Objects the host has unloaded: their bundles are gone from memory (another object may be
  // at the same address now).
  for (auto it = processBundles_.begin(); it != processBundles_.end();) {
    const bundle::LoadedBundle &was = it->second.found;
    const bool still = llvm::any_of(loaded, [&](const bundle::LoadedBundle &now) {
      return now.bytes.data() == was.bytes.data() && now.bytes.size() == was.bytes.size() && now.base == was.base &&
             now.object == was.object;
    });
    if (still) {
      ++it;
      continue;
    }
    dropImages(it->second.images);
    it = processBundles_.erase(it);
  }
  for (const bundle::LoadedBundle &found : loaded) {
    auto [it, isNew] = processBundles_.try_emplace(found.bytes.data());
    ProcessBundle &pb = it->second;
    if (isNew) {
      pb.found = found;
      auto images = readBundleImages(found.bytes, nullptr);
      if (!images) {
        // A broken bundle in some loaded object must not stop the others from loading.
        llvm::consumeError(images.takeError());
        continue;
      }
      for (size_t i = 0; i < images->size(); ++i)
        pb.images.push_back(
            images_.add(std::move((*images)[i]), found.object, static_cast<unsigned>(i), nullptr, &pb.found));
    }
    // An object opened RTLD_LOCAL joins the global scope when the host promotes it.
    if (!pb.global && bundle::inGlobalScope(pb.found)) {
      pb.global = true;
      joinGlobalScope(pb.images);
    }
  }
  if (!preloaded_) {
    loadPreloads();
    preloaded_ = true;
    reportDuplicates(scopes_.globalOrder());
  }
  return llvm::Error::success();
}

void Loader::loadPreloads() {
  const char *list = getauxval(AT_SECURE) ? nullptr : std::getenv("DEVDL_PRELOAD");
  if (!list || !*list) return;
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
  // As with LD_PRELOAD, a file that cannot be loaded is reported and skipped.
  for (const std::string &item : preloadList(list)) {
    auto handle = openFile(findFile(item.c_str()), DEVDL_LAZY | DEVDL_GLOBAL | DEVDL_NODELETE);
    if (!handle) {
      std::fprintf(stderr, "devdl: DEVDL_PRELOAD: %s: ignored\n", llvm::toString(handle.takeError()).c_str());
      continue;
    }
    // openFile appended the images to the global scope: move them to their place.
    const std::vector<uint32_t> &ids = (*handle)->images;
    scopes_.place(ids, position, images_.pointers());
    position += ids.size();
    if (Debug::get().on(Debug::Libs)) Debug::get().print("preloaded " + (*handle)->path);
  }
}

void Loader::reportDuplicates(std::span<const uint32_t> ids) {
  if (!Debug::get().on(Debug::Symbols)) return;
  for (uint32_t id : ids)
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

}  // namespace devdl
