// The persistent program cache: linked programs' native binaries in files, one per key, shared
// by every process of the user. docs/cache-format.md describes the entries.
//
// Nothing here may fail a load: every problem (a read-only or full disk, a bad entry, a
// directory others could write to) turns into "no cache" for that call, with a line under
// DEVDL_DEBUG=statistics. Entries are written to a temporary file, synced and renamed into
// place, so a reader sees a whole entry or none; each carries its key and a checksum and is
// verified before use; a bad one is deleted. Processes that miss the same key take turns at a
// lock file in the directory: one builds and stores, the others wait for its entry.
//
// Its parts: disk_cache.cpp (entries read, verified and written; statistics), cache_settings.cpp
// (the environment), cache_directory.h (the directory: trusting it and its files, entry files put
// in it whole, and its bound, which eviction.cpp keeps), build_lock.cpp (one build per key across
// processes), cache_listing.cpp (devdl-cache's list and clear), cache_files.h (the files' names,
// and what the parts share).
#pragma once

#include "store/binary_store.h"
#include "store/cache_directory.h"

#include <llvm/Support/Error.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace devdl::store {

/// One entry's file, as devdl-cache lists it.
struct EntryFile {
  Key key;
  std::string path;
  uint64_t size = 0;      // of the file
  int64_t lastUsed = 0;   // seconds since the epoch (the file's mtime, set on every hit)
  std::string description;
  std::string problem;    // why it would not be used; "" when it verifies
};

/// "512 B", "47 KiB", "12 MiB", "10 GiB".
std::string bytesText(uint64_t bytes);

struct Statistics {
  uint64_t hits = 0, misses = 0, stores = 0, rejected = 0, evicted = 0;
  uint64_t bytesRead = 0, bytesWritten = 0;
  uint64_t nanosecondsSaved = 0;  // build time of the entries hit, less the time to read them
  uint64_t waits = 0, waitNanoseconds = 0;  // for other processes' builds of a key missed
};

/// Thread-safe: one process's threads load and store at once (one at a time here; entries are
/// small next to the builds they save).
class DiskCache final : public BinaryStore {
 public:
  /// The directory as the environment says: DEVDL_CACHE_DIR, else $XDG_CACHE_HOME/devdl, else
  /// $HOME/.cache/devdl. Fails (NotFound) saying which when DEVDL_CACHE=0, in secure-execution
  /// processes (as glibc ignores LD_LIBRARY_PATH there), or with no home.
  static llvm::Expected<std::string> directoryFromEnvironment();
  /// DEVDL_CACHE_MAX_SIZE (bytes, or with a K, M or G suffix), else 1 GiB.
  static uint64_t maxSizeFromEnvironment();
  /// DEVDL_CACHE_WAIT (seconds, a fraction allowed), else kDefaultBuildWait.
  static std::chrono::milliseconds buildWaitFromEnvironment();
  /// How long a process that misses a key waits for another process's build of it before it
  /// builds the program itself: while the builder lives (the kernel lets go of a dead one's
  /// lock), as threads wait (support/waiting.h). DEVDL_CACHE_WAIT bounds it, against a builder
  /// that is stopped or stuck.
  static constexpr std::chrono::milliseconds kDefaultBuildWait = std::chrono::milliseconds::max();

  /// The process's cache (the loader's), set up from the environment on first use; its
  /// statistics are printed at exit under DEVDL_DEBUG=statistics.
  static DiskCache &process();

  DiskCache(std::string directory, uint64_t maxSize, std::chrono::milliseconds buildWait = kDefaultBuildWait,
            unsigned sweepEvery = CacheDirectory::kDefaultSweepEvery);
  ~DiskCache();
  DiskCache(const DiskCache &) = delete;
  DiskCache &operator=(const DiskCache &) = delete;

  /// Whether entries are looked up and stored at all.
  bool enabled() const override { return directory_.usable(); }

  /// The entry for `key`, verified; nullopt on a miss or a bad entry (which is deleted).
  std::optional<Entry> load(const Key &key) override;
  /// Takes the key's lock file (.lock-<key>), waiting while another process holds it, at most
  /// the build wait; a lock whose holder died is free (the kernel lets go of it). Threads of
  /// this process do not wait here for each other: the loader has them wait for each other.
  BuildTurn awaitTurn(const Key &key) override;
  /// Stores an entry atomically and durably (synced before it is renamed into place), then
  /// counts it in the tally, which has the directory swept where the cache is over its bound
  /// (the least recently used entries evicted). Failures only disable storing for the rest of
  /// the process.
  void store(const Key &key, std::string_view description, std::string_view binary,
             uint64_t buildNanoseconds) override;
  /// The same for a copy of an entry another store keeps (the remote store's), but not synced: a
  /// crash can lose it or leave it torn, which costs fetching it again (its checksum refuses a
  /// torn one), where the two syncs cost each remote hit 0.2-1.4 ms on the GPU machine.
  void storeCopy(const Key &key, const Entry &entry);
  /// An entry loaded but refused by the backend (a driver that changed under the same version
  /// string): deleted so that the next load rebuilds it.
  void discard(const Key &key, std::string_view why) override;
  void unusable(const Key &key, std::string_view why) override;
  /// Adds the build time a hit saved, less what loading it cost.
  void saved(uint64_t buildNanoseconds, uint64_t loadNanoseconds) override;

  /// The summary of an image file (store/image_summary.h) by its key, verified as an entry is;
  /// counted apart from the programs.
  std::optional<Entry> loadSummary(const Key &key);
  /// Stores a summary as storeCopy() stores an entry, not synced: a torn one fails its checks,
  /// which costs reading its image file again.
  void storeSummary(const Key &key, std::string_view description, std::string_view summary);

  /// Every entry file, checked as load() checks it (for devdl-cache); none where the directory
  /// does not exist, an error naming it where it cannot be read.
  llvm::Expected<std::vector<EntryFile>> list() const;
  /// Deletes every entry, leftover temporary file and lock file no process holds: the number
  /// deleted, or an error naming the directory or the files that could not be deleted (the
  /// others are deleted all the same).
  llvm::Expected<size_t> clear() const;

  const Statistics &statistics() const { return stats_; }
  /// The same for image summaries (hits: summaries used, misses: files read without one).
  const Statistics &summaryStatistics() const { return summaryStats_; }

 private:
  class FileLock;
  class TurnWait;  // awaitTurn()'s phases
  /// load() and loadSummary() with mutex_ held: counted in `counts`; a bad entry's report ends
  /// with what happens `instead`.
  std::optional<Entry> read(const Key &key, Statistics &counts, std::string_view instead);
  /// store(), storeCopy() and storeSummary(): with `sync`, the entry is on disk before its name is.
  void write(const Key &key, std::string_view description, std::string_view binary, uint64_t buildNanoseconds,
             bool sync, Statistics &counts);

  std::mutex mutex_;  // of everything below once the cache is in use
  CacheDirectory directory_;
  std::chrono::milliseconds buildWait_;
  std::vector<Key> lockedHere_;  // keys whose lock file this process holds
  Statistics stats_;
  Statistics summaryStats_;
};

}  // namespace devdl::store
