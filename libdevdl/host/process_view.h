// What the host loader has loaded, seen without the loader's lock: the objects carrying device
// images in link-map order, whether each is in the host's global scope, and the images of those
// the loader did not know, read while a reference keeps each loaded. The loader applies a view
// under its lock (loader/process_scan.cpp).
#pragma once

#include "host/loaded_bundles.h"
#include "image/device_image.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace devdl::host {

/// Whether two finds are the same load of the same bundle.
bool sameLoad(const LoadedBundle &a, const LoadedBundle &b);

/// What the loader knows of the process when it asks: only what may have changed is asked again.
struct KnownObjects {
  std::vector<LoadedBundle> global;  // told global: asked again only once objects were loaded or unloaded
  std::vector<LoadedBundle> others;  // local, or taken as global without being told
  uint64_t generation = 0;           // of the list the loader applied last
  bool listed = false;               // whether it applied a list at all
};

struct ProcessView {
  uint64_t generation = 0;
  bool listed = false;  // `objects` are every loaded bundle: objects were loaded or unloaded
  struct Object {
    LoadedBundle found;
    bool global = false;
    bool told = true;  // its exports told whether it is global (inGlobalScope)
    std::optional<std::vector<DeviceImage>> images;  // read for a bundle the loader did not know
    /// Keeps an object whose images were read loaded until the loader has added them: their bytes
    /// are its memory, which the host may unmap as soon as another thread closes it.
    std::shared_ptr<const void> reference;
  };
  std::vector<Object> objects;  // in link-map order; unlisted: the known ones not told global
};

/// Asks the host loader (dl_iterate_phdr, dlsym, dlopen RTLD_NOLOAD): call it without the
/// loader's lock. The images read keep copies of their strings; only their bytes stay in the
/// object. A bundle that cannot be read stops no other (said under DEVDL_DEBUG=libs).
ProcessView observeProcess(const KnownObjects &known);

}  // namespace devdl::host
