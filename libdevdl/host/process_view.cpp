#include "host/process_view.h"

#include "image/read_image.h"
#include "support/debug.h"

#include <llvm/ADT/STLExtras.h>

namespace devdl::host {

bool sameLoad(const LoadedBundle &a, const LoadedBundle &b) {
  return a.bytes.data() == b.bytes.data() && a.bytes.size() == b.bytes.size() && a.base == b.base &&
         a.object == b.object;
}

namespace {

// The images of an object the loader did not know, read while `reference` keeps it loaded (the
// caller keeps it until the images are added); none (nullopt) where it was unloaded meanwhile.
std::optional<std::vector<DeviceImage>> readNew(const LoadedBundle &found, std::shared_ptr<const void> &reference) {
  reference = ObjectReference::take(found.object, found.base);
  if (!reference && !found.object.empty()) return std::nullopt;
  // Images carried in the object's file are read from it, while it is loaded.
  const std::string file = found.object.empty() ? "/proc/self/exe" : found.object;
  auto images = found.carrier == LoadedBundle::Carrier::OffloadTables ? readDpcppImagesOfFile(file)
                : found.carrier == LoadedBundle::Carrier::CudaObjects ? readCudaObjectImagesOfFile(file)
                                                                      : readBundleImages(found.bytes, nullptr);
  std::vector<DeviceImage> read;
  if (!images) {
    if (Debug::get().on(Debug::Libs))
      Debug::get().print("images of " + found.object + " not read: " + llvm::toString(images.takeError()));
    else
      llvm::consumeError(images.takeError());
    return read;
  }
  for (DeviceImage &image : *images) {
    image.ownStrings();
    read.push_back(std::move(image));
  }
  return read;
}

}  // namespace

ProcessView observeProcess(const KnownObjects &known) {
  ProcessView view;
  // Once listed, the objects are listed again only when the host loaded or unloaded one since.
  if (known.listed) view.generation = loadedObjectsGeneration();
  if (known.listed && view.generation == known.generation) {
    // Nothing loaded or unloaded; only a promotion to the global scope (a second dlopen with
    // RTLD_GLOBAL) can have changed what is global, and that counts as neither.
    for (const LoadedBundle &found : known.others) {
      const std::optional<bool> global = inGlobalScope(found);
      view.objects.push_back({found, global.value_or(true), global.has_value(), std::nullopt, nullptr});
    }
    return view;
  }
  view.listed = true;
  auto in = [](const std::vector<LoadedBundle> &list, const LoadedBundle &found) {
    return llvm::any_of(list, [&](const LoadedBundle &k) { return sameLoad(k, found); });
  };
  LoadedObjects listed = findLoadedBundles();
  view.generation = listed.generation;  // of the list itself, whatever was loaded meanwhile
  for (LoadedBundle &found : listed.bundles) {
    ProcessView::Object object{std::move(found), false, true, std::nullopt, nullptr};
    const bool isKnown = in(known.global, object.found) || in(known.others, object.found);
    // Every object is asked again once objects were loaded or unloaded: one unloaded and loaded
    // again RTLD_LOCAL at the same address is the same find, but no longer global. One that
    // cannot be told is taken as global, as the objects loaded with the program are.
    const std::optional<bool> asked = inGlobalScope(object.found);
    object.global = asked.value_or(true);
    object.told = asked.has_value();
    if (!isKnown) object.images = readNew(object.found, object.reference);
    view.objects.push_back(std::move(object));
  }
  return view;
}

}  // namespace devdl::host
