// The disk cache's bound (DEVDL_CACHE_MAX_SIZE): which entries a sweep of the directory evicts.
// docs/cache-format.md ("Bound").
#pragma once

#include <llvm/ADT/STLFunctionalExtras.h>

#include <time.h>

#include <cstdint>
#include <string>
#include <vector>

namespace devdl::store {

/// An entry's file as a sweep finds it.
struct SweptEntry {
  std::string name;
  uint64_t size = 0;
  struct timespec used = {};  // its last use: the file's modification time, which a hit sets
};

/// Evicts `entries`, the least recently used first, until `total` (their sizes' sum) is within
/// `bound`: `evict` deletes one and says whether it is gone; one it could not delete is not
/// counted, and the next one goes. The total left.
uint64_t evictLeastRecentlyUsed(std::vector<SweptEntry> entries, uint64_t total, uint64_t bound,
                                llvm::function_ref<bool(const SweptEntry &)> evict);

}  // namespace devdl::store
