// Driver libraries opened at run time (libOpenCL.so.1, libcuda.so.1, next libze_loader.so.1):
// one build of devdl runs where a driver is missing and says so, instead of failing to load.
#pragma once

#include "support/error.h"
#include "support/made_once.h"

#include <llvm/Support/Error.h>

#include <span>
#include <string>
#include <string_view>

namespace devdl {

/// An entry point to take from a driver library: its symbol, and where its address goes.
struct EntryPoint {
  const char *symbol;
  void **slot;
  bool optional = false;  // a newer entry point the backend does without (left null)
};

/// Opens `soname` and fills every entry point; the library is never closed, since the driver's
/// objects may outlive any devdl handle. Returns "" when every required entry point was found,
/// else why not: "no <what>: cannot load <soname> (<dlerror>)", or "<soname> lacks <symbol>
/// (<requirement>)" for the first one missing.
std::string openDriverLibrary(const char *soname, std::string_view what, std::string_view requirement,
                              std::span<const EntryPoint> entries);

/// A backend's entry points as loading them gave them, and why they cannot be used ("" when
/// they can).
template <typename Api>
struct LoadedApi {
  Api api;
  std::string error;
};

/// `load()`'s entry points, loaded on first use and kept for the life of the process (one for
/// each Api); NotFound with load's reason where they cannot be used.
template <typename Api>
llvm::Expected<const Api &> loadedOnce(LoadedApi<Api> (*load)()) {
  static MadeOnce<LoadedApi<Api>> once;
  const LoadedApi<Api> &loaded = once.get(load);
  if (!loaded.error.empty()) return fail(ErrorCode::NotFound, loaded.error);
  return loaded.api;
}

}  // namespace devdl
