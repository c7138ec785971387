#include "support/driver_library.h"

#include <dlfcn.h>

namespace devdl {

std::string openDriverLibrary(const char *soname, std::string_view what, std::string_view requirement,
                              std::span<const EntryPoint> entries) {
  void *library = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!library) return "no " + std::string(what) + ": cannot load " + soname + " (" + dlerror() + ")";
  std::string missing;
  for (const EntryPoint &entry : entries) {
    *entry.slot = dlsym(library, entry.symbol);
    if (!*entry.slot && !entry.optional && missing.empty())
      missing = std::string(soname) + " lacks " + entry.symbol + " (" + std::string(requirement) + ")";
  }
  return missing;
}

}  // namespace devdl
