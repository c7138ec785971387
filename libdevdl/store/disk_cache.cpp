// The disk cache's core: entries read, verified and written, and what the process's use of them
// came to. disk_cache.h says which file holds each of its other parts.
#include "store/disk_cache.h"

#include "store/cache_directory.h"
#include "store/cache_files.h"

#include "support/debug.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>

namespace devdl::store {

namespace {

constexpr size_t kHeaderSize = Entry::kHeaderSize;
constexpr int64_t kLastUseResolutionSeconds = 60;

}  // namespace

std::string bytesText(uint64_t bytes) {
  char text[32];
  if (bytes < 10 * 1024) std::snprintf(text, sizeof text, "%" PRIu64 " B", bytes);
  else if (bytes < 10 * 1024 * 1024) std::snprintf(text, sizeof text, "%" PRIu64 " KiB", bytes / 1024);
  else if (bytes < uint64_t(10) << 30) std::snprintf(text, sizeof text, "%" PRIu64 " MiB", bytes >> 20);
  else std::snprintf(text, sizeof text, "%" PRIu64 " GiB", bytes >> 30);
  return text;
}

DiskCache::DiskCache(std::string directory, uint64_t maxSize, std::chrono::milliseconds buildWait, unsigned sweepEvery)
    : directory_(std::move(directory), maxSize, sweepEvery), buildWait_(buildWait) {}

DiskCache::~DiskCache() {
  if (!Debug::get().on(Debug::Statistics)) return;
  const Statistics &summaries = summaryStats_;
  if (summaries.hits + summaries.misses != 0)
    reportCache("image summaries: " + std::to_string(summaries.hits) + " used, " +
                std::to_string(summaries.misses) + " missing, " + std::to_string(summaries.stores) + " stored, " +
                std::to_string(summaries.rejected) + " bad deleted; read " + bytesText(summaries.bytesRead) +
                ", wrote " + bytesText(summaries.bytesWritten));
  if (stats_.hits + stats_.misses == 0) return;
  char saved[32], waited[32];
  std::snprintf(saved, sizeof saved, "%.1f ms", static_cast<double>(stats_.nanosecondsSaved) / 1e6);
  std::snprintf(waited, sizeof waited, "%.1f ms", static_cast<double>(stats_.waitNanoseconds) / 1e6);
  reportCache(std::to_string(stats_.hits) + " hits, " + std::to_string(stats_.misses) + " misses, " +
              std::to_string(stats_.stores) + " stored, " + std::to_string(stats_.rejected) + " bad entries deleted, " +
              std::to_string(stats_.evicted) + " evicted; read " + bytesText(stats_.bytesRead) + ", wrote " +
              bytesText(stats_.bytesWritten) + "; build time saved " + saved + "; waited for other processes' builds " +
              std::to_string(stats_.waits) + " times, " + waited);
}

std::optional<Entry> DiskCache::load(const Key &key) {
  std::lock_guard lock(mutex_);
  return read(key, stats_, "the program is built again");
}

std::optional<Entry> DiskCache::loadSummary(const Key &key) {
  std::lock_guard lock(mutex_);
  return read(key, summaryStats_, "the image file is read");
}

std::optional<Entry> DiskCache::read(const Key &key, Statistics &counts, std::string_view instead) {
  if (!directory_.prepare()) return std::nullopt;
  const std::string name = entryName(key);
  // O_NONBLOCK: a FIFO put in an entry's place must not hang the load before fstat shows it is
  // no regular file (regular files ignore the flag).
  Fd file(openat(directory_.fd(), name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  struct stat st;
  if (file.fd < 0 || fstat(file.fd, &st) != 0) {
    if (errno != ENOENT) reportCache("cannot read " + directory_.pathOf(name) + ": " + errnoText());
    ++counts.misses;
    return std::nullopt;
  }
  Entry entry;
  if (std::string why = readEntry(file.fd, st, directory_.user(), key, entry); !why.empty()) {
    ++counts.misses;
    if (untrustedEntry(st, directory_.user()).empty()) {
      // Delete it only if it is still the file read: another process may have put a good
      // entry in its place meanwhile.
      struct stat now;
      if (fstatat(directory_.fd(), name.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_ino == st.st_ino &&
          now.st_dev == st.st_dev)
        unlinkat(directory_.fd(), name.c_str(), 0);
      ++counts.rejected;
      reportCache(directory_.pathOf(name) + ": " + why + "; deleted, " + std::string(instead));
    } else {
      reportCache(directory_.pathOf(name) + ": not trusted, " + why + "; " + std::string(instead));
    }
    return std::nullopt;
  }
  // The file's time is its last use, for eviction (access times are often not kept); to the
  // minute is close enough, and spares most hits a write.
  if (time(nullptr) - st.st_mtime >= kLastUseResolutionSeconds) {
    const struct timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
    futimens(file.fd, times);
  }
  ++counts.hits;
  counts.bytesRead += static_cast<uint64_t>(st.st_size);
  return entry;
}

void DiskCache::store(const Key &key, std::string_view description, std::string_view binary, uint64_t buildNanoseconds) {
  write(key, description, binary, buildNanoseconds, /*sync=*/true, stats_);
}

void DiskCache::storeCopy(const Key &key, const Entry &entry) {
  write(key, entry.description(), entry.binary(), entry.buildNanoseconds, /*sync=*/false, stats_);
}

void DiskCache::storeSummary(const Key &key, std::string_view description, std::string_view summary) {
  write(key, description, summary, 0, /*sync=*/false, summaryStats_);
}

void DiskCache::write(const Key &key, std::string_view description, std::string_view binary, uint64_t buildNanoseconds,
                      bool sync, Statistics &counts) {
  std::lock_guard lock(mutex_);
  if (!enabled() || !directory_.writable()) return;
  description = description.substr(0, Entry::kMaxDescription);
  const uint64_t size = kHeaderSize + description.size() + binary.size();
  if (size > directory_.maxSize()) {
    reportCache("an entry of " + bytesText(size) + " is over the bound of " + bytesText(directory_.maxSize()) +
                ": not stored");
    return;
  }
  if (!directory_.prepare()) return;
  const std::string header = entryHeader(key, description, binary, buildNanoseconds);
  if (std::string failure = directory_.putEntry(key, {header, binary, description}, sync); !failure.empty()) {
    reportCache(failure + (directory_.writable() ? "; not stored" : "; nothing more is stored by this process"));
    return;
  }
  ++counts.stores;
  counts.bytesWritten += size;
  stats_.evicted += directory_.tally(size);
}

void DiskCache::discard(const Key &key, std::string_view why) {
  std::lock_guard lock(mutex_);
  if (!directory_.prepare()) return;
  const std::string name = entryName(key);
  unlinkat(directory_.fd(), name.c_str(), 0);
  // load() counted it as a hit; the program is built after all.
  if (stats_.hits) --stats_.hits;
  ++stats_.misses;
  ++stats_.rejected;
  reportCache(directory_.pathOf(name) + ": " + std::string(why) + "; deleted, the program is built again");
}

void DiskCache::unusable(const Key &key, std::string_view why) {
  std::lock_guard lock(mutex_);
  if (stats_.hits) --stats_.hits;  // as discard()
  ++stats_.misses;
  reportCache(directory_.pathOf(entryName(key)) + ": " + std::string(why) + "; kept, the program is built here");
}

void DiskCache::saved(uint64_t buildNanoseconds, uint64_t loadNanoseconds) {
  std::lock_guard lock(mutex_);
  if (buildNanoseconds > loadNanoseconds) stats_.nanosecondsSaved += buildNanoseconds - loadNanoseconds;
}

}  // namespace devdl::store
