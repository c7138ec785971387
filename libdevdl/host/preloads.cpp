#include "host/preloads.h"

#include "host/loaded_bundles.h"
#include "support/debug.h"

#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringExtras.h>

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>

namespace devdl::host {

std::vector<std::string> preloadList(const char *list) {
  std::vector<std::string> items;
  llvm::SmallVector<llvm::StringRef, 8> parts;
  llvm::SplitString(list ? list : "", parts, " :");
  for (llvm::StringRef part : parts) items.push_back(part.str());
  return items;
}

void initializePreloadedTools() {
  // Once: the host loader loads preloaded objects as the program starts, never later. Not
  // waited on: a preloaded object's constructor may itself register with devdl.
  static std::atomic<bool> done{false};
  if (done.exchange(true)) return;
  const std::vector<std::string> items = preloadList(std::getenv("LD_PRELOAD"));
  if (items.empty()) return;
  const LoadedObjects carriers = findLoadedBundles();
  for (auto item = items.rbegin(); item != items.rend(); ++item) {
    const auto carries = [&](const LoadedBundle &bundle) {
      return !bundle.object.empty() && loadedFrom(*item, bundle.object);
    };
    if (std::any_of(carriers.bundles.begin(), carriers.bundles.end(), carries)) continue;
    // Not loaded (the host loader said why, and went on): nothing to run.
    void *handle = dlopen(item->c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (!handle) continue;
    if (Debug::get().on(Debug::Libs))
      Debug::get().print("before CUDA starts, LD_PRELOAD's " + *item + " is initialized (now, if it was not yet)");
    dlclose(handle);  // loaded as the program started: never unloaded
  }
}

}  // namespace devdl::host
