// The disk cache's directory apart from its entries: made where missing, checked once, then held
// open, so that every file is opened, written and renamed in the directory that was checked;
// whether it and the entry files in it can be trusted (another user's, or one others can write
// to, could hand this process programs of their choice); entry files put in it whole; and its
// bound, kept by eviction (eviction.cpp). docs/cache-format.md ("Where", "Entry", "Bound").
#pragma once

#include "store/binary_store.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace devdl::store {

/// Why an opened entry file cannot be trusted ("" when it can): it must be a plain file of
/// `user` (this user) that nobody else can write.
std::string untrustedEntry(const struct stat &st, uid_t user);
/// Why the cache's directory cannot be trusted ("" when it can), said after its path: it must
/// be `user`'s (this user's), and nobody else may write to it.
std::string untrustedDirectory(const struct stat &st, uid_t user);

/// Says a line of the disk cache's under DEVDL_DEBUG=statistics ("cache: <text>").
void reportCache(const std::string &text);

/// Not thread-safe: the disk cache's mutex guards it (all but usable()).
class CacheDirectory {
 public:
  /// A store sweeps the directory (evicts over the bound, removes what killed writers and
  /// builders left) when the tally says the cache is over its bound, and after this many stores.
  static constexpr unsigned kDefaultSweepEvery = 256;

  /// An empty `path` is no directory: the cache is off.
  CacheDirectory(std::string path, uint64_t maxSize, unsigned sweepEvery);
  ~CacheDirectory();
  CacheDirectory(const CacheDirectory &) = delete;
  CacheDirectory &operator=(const CacheDirectory &) = delete;

  /// Whether the cache is used at all; off for good once prepare() fails.
  bool usable() const { return usable_.load(std::memory_order_relaxed); }
  const std::string &path() const { return path_; }
  std::string pathOf(const std::string &name) const;
  /// The bound on the entries' total size (DEVDL_CACHE_MAX_SIZE).
  uint64_t maxSize() const { return maxSize_; }
  /// This user, as the directory was checked to be its: entries must be too.
  uid_t user() const { return user_; }
  /// Open once prepared: entries are opened, written and renamed in it.
  int fd() const { return fd_; }

  /// Whether the cache can be used now: its directory open (and made, where missing). When it
  /// cannot be, says why under DEVDL_DEBUG=statistics and turns the cache off.
  bool prepare();
  /// Whether fd() is still the directory prepare() opened and checked.
  bool held() const;

  /// Whether entries are still put here: a failure to put one stops it for the rest of the
  /// process (a read-only or full disk), unless only that entry was lost.
  bool writable() const { return writable_; }
  /// Puts `key`'s entry file, `parts` in order, in place whole; with `sync`, it is on disk before
  /// its name is. "" when it is in place, else why not.
  std::string putEntry(const Key &key, std::initializer_list<std::string_view> parts, bool sync);
  /// Adds a stored entry's `bytes` to the tally (.size), sweeping where it asks for a sweep: the
  /// number of entries evicted.
  uint64_t tally(uint64_t bytes);

 private:
  /// Creates the directory (0700) where missing and opens it; "" when it is a directory of this
  /// user's that others cannot write to, else why not.
  std::string openChecked();
  /// Reads the whole directory: evicts the least recently used entries over the bound (counted
  /// in `evicted`) and removes what killed writers and builders left. The entries' total after
  /// it; nullopt where the directory could not be read.
  std::optional<uint64_t> sweep(uint64_t &evicted);

  std::atomic<bool> usable_;
  std::string path_;
  uint64_t maxSize_;
  unsigned sweepEvery_;
  int fd_ = -1;
  dev_t device_ = 0;  // what fd_ was opened on
  ino_t inode_ = 0;
  uid_t user_ = 0;
  bool writable_ = true;
  unsigned temporaries_ = 0;  // numbers this object's temporary files
};

}  // namespace devdl::store
