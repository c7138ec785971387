// The disk cache's bound: a store counts its entry in the tally (.size), and where the tally
// says so, sweeps the directory: it sums the entries, evicts the least recently used down to the
// bound, and removes what killed writers and builders left. docs/cache-format.md ("Bound").
#include "store/eviction.h"

#include "store/cache_directory.h"
#include "store/cache_files.h"
#include "store/disk_cache.h"

#include <fcntl.h>
#include <sys/file.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <thread>

namespace devdl::store {

namespace {

// A temporary file this old belongs to a writer that was killed.
constexpr int64_t kStaleTemporarySeconds = 600;
constexpr int kTallyLooks = 50;  // a millisecond apart

}  // namespace

uint64_t evictLeastRecentlyUsed(std::vector<SweptEntry> entries, uint64_t total, uint64_t bound,
                                llvm::function_ref<bool(const SweptEntry &)> evict) {
  std::sort(entries.begin(), entries.end(), [](const SweptEntry &a, const SweptEntry &b) {
    return a.used.tv_sec != b.used.tv_sec ? a.used.tv_sec < b.used.tv_sec : a.used.tv_nsec < b.used.tv_nsec;
  });
  for (const SweptEntry &entry : entries) {
    if (total <= bound) break;
    if (evict(entry)) total -= entry.size;
  }
  return total;
}

uint64_t CacheDirectory::tally(uint64_t bytes) {
  // Under the tally's lock, so that processes storing at once count each other's entries and
  // sweep one at a time. A tally that cannot be kept means a sweep at each store, as without one;
  // one held for long (the sweep of a large directory, a stopped process) leaves this entry to
  // be counted by the next sweep rather than hold the store up.
  uint64_t evicted = 0;
  Fd file(openat(fd_, kTallyName, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600));
  struct stat st;
  if (file.fd < 0 || fstat(file.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    sweep(evicted);
    return evicted;
  }
  for (int look = 0; flock(file.fd, LOCK_EX | LOCK_NB) != 0; ++look) {
    if (errno != EWOULDBLOCK) {
      sweep(evicted);
      return evicted;
    }
    if (look == kTallyLooks) return evicted;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  char text[64] = {};
  uint64_t total = 0;
  unsigned stores = 0;
  // Empty (new) or unreadable: the directory says what the total is.
  const bool known = pread(file.fd, text, sizeof text - 1, 0) > 0 &&
                     std::sscanf(text, "%" SCNu64 " %u", &total, &stores) == 2;
  total += bytes;
  if (!known || total > maxSize_ || ++stores >= sweepEvery_) {
    const std::optional<uint64_t> swept = sweep(evicted);
    if (!swept) return evicted;  // left as it was: the next store sweeps again where it must
    total = *swept;
    stores = 0;
  }
  char line[64];
  writeOver(file.fd, line, std::snprintf(line, sizeof line, "%20" PRIu64 " %10u\n", total, stores));
  return evicted;
}

std::optional<uint64_t> CacheDirectory::sweep(uint64_t &evicted) {
  // An open file description of its own: readdir moves its offset, which a dup would share.
  Directory dir(fdopendir(openat(fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)));
  if (!dir) return std::nullopt;
  std::vector<SweptEntry> entries;
  uint64_t total = 0;
  const int64_t now = time(nullptr);
  while (const dirent *d = readdir(dir.get())) {
    const std::string_view name = d->d_name;
    struct stat st;
    if (fstatat(fd_, d->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    if (isTemporaryName(name)) {
      if (now - st.st_mtime > kStaleTemporarySeconds) unlinkat(fd_, d->d_name, 0);
    } else if (isLockName(name)) {
      removeUnheldLock(fd_, d->d_name);  // left by a killed builder
    } else if (keyFromName(name)) {
      entries.push_back({std::string(name), static_cast<uint64_t>(st.st_size), st.st_mtim});
      total += static_cast<uint64_t>(st.st_size);
    }
  }
  if (total <= maxSize_) return total;
  total = evictLeastRecentlyUsed(std::move(entries), total, maxSize_, [&](const SweptEntry &entry) {
    // Another process may evict the same file: it is gone either way.
    if (unlinkat(fd_, entry.name.c_str(), 0) != 0 && errno != ENOENT) return false;
    ++evicted;
    return true;
  });
  reportCache("evicted the least recently used entries down to " + bytesText(total) + " (bound " +
              bytesText(maxSize_) + ")");
  return total;
}

}  // namespace devdl::store
