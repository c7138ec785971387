// The disk cache's settings from the environment (DEVDL_CACHE, DEVDL_CACHE_DIR, XDG_CACHE_HOME,
// HOME, DEVDL_CACHE_MAX_SIZE, DEVDL_CACHE_WAIT), and the process's cache made from them. A value
// that is no setting is said under DEVDL_DEBUG=statistics and the default taken.
#include "store/disk_cache.h"

#include "support/debug.h"
#include "support/environment.h"
#include "support/error.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace devdl::store {

llvm::Expected<std::string> DiskCache::directoryFromEnvironment() {
  auto none = [](const char *reason) { return fail(ErrorCode::NotFound, reason); };
  if (secureExecution()) return none("off in a secure-execution process");
  if (const char *off = devdlVariable("DEVDL_CACHE"); off && std::string_view(off) == "0") return none("DEVDL_CACHE=0");
  if (const char *dir = devdlVariable("DEVDL_CACHE_DIR"); dir && *dir) return dir;
  // The XDG base directory specification ignores a relative XDG_CACHE_HOME.
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg == '/') return std::string(xdg) + "/devdl";
  if (const char *home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/devdl";
  return none("no DEVDL_CACHE_DIR, XDG_CACHE_HOME or HOME");
}

uint64_t DiskCache::maxSizeFromEnvironment() {
  constexpr uint64_t kDefault = uint64_t(1) << 30;
  const char *value = devdlVariable("DEVDL_CACHE_MAX_SIZE");
  if (!value || !*value) return kDefault;
  char *end = nullptr;
  errno = 0;
  uint64_t size = std::strtoull(value, &end, 10);
  const int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
  if (shift) ++end;
  if (errno || !std::isdigit(static_cast<unsigned char>(value[0])) || *end || size > (UINT64_MAX >> shift)) {
    if (Debug::get().on(Debug::Statistics))
      Debug::get().print("cache: DEVDL_CACHE_MAX_SIZE=" + std::string(value) + " is no size (bytes, or with K, M or G); 1G it is");
    return kDefault;
  }
  return size << shift;
}

std::chrono::milliseconds DiskCache::buildWaitFromEnvironment() {
  const char *value = devdlVariable("DEVDL_CACHE_WAIT");
  if (!value || !*value) return kDefaultBuildWait;
  const std::optional<double> seconds = secondsIn(value);
  if (!seconds) {
    if (Debug::get().on(Debug::Statistics))
      Debug::get().print("cache: DEVDL_CACHE_WAIT=" + std::string(value) +
                         " is no number of seconds (0 to 86400); waiting while the builder lives");
    return kDefaultBuildWait;
  }
  return std::chrono::milliseconds(static_cast<int64_t>(*seconds * 1000));
}

DiskCache &DiskCache::process() {
  static DiskCache cache = [] {
    Debug::get();  // made first, so that it outlives the cache's report at exit
    llvm::Expected<std::string> dir = directoryFromEnvironment();
    if (!dir) {
      const std::string why = llvm::toString(dir.takeError());
      if (Debug::get().on(Debug::Statistics)) Debug::get().print("cache: none (" + why + ")");
      dir = std::string();
    }
    return DiskCache(std::move(*dir), maxSizeFromEnvironment(), buildWaitFromEnvironment());
  }();
  return cache;
}

}  // namespace devdl::store
