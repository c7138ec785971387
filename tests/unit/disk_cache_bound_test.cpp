// The disk cache's bound and housekeeping: eviction of the least recently used, sweeps where the
// tally says, leftovers of killed writers removed when old, and listing and clearing.
#include "unit/disk_cache_fixture.h"
#include "test_support.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

namespace devdl::store {
namespace {

using namespace fixture;
using test::readFile;
using test::scratchDir;
using test::writeFile;

// A killed writer that had this process's ID (in a container started again, or before a
// reboot) left temporary files under the names this process would take first.
TEST(DiskCache, LeftoversUnderThisProcesssNamesDoNotStopStoring) {
  const std::string dir = scratchDir();
  DiskCache cache(dir, kUnbounded);
  cache.store(keyOf("first"), "", "binary", 1);  // makes the directory; its temporary file was number 0
  for (int n = 1; n <= 4; ++n)
    writeFile(dir + "/.tmp-" + keyOf("k").hex() + "-" + std::to_string(getpid()) + "-" + std::to_string(n), "half");
  cache.store(keyOf("k"), "", "binary", 1);
  cache.store(keyOf("k2"), "", "binary", 1);
  EXPECT_EQ(cache.statistics().stores, 3u);
  EXPECT_TRUE(cache.load(keyOf("k")));
  EXPECT_TRUE(cache.load(keyOf("k2")));
  EXPECT_EQ(filesIn(dir).size(), 3u + 4u + 1u) << "three entries, the leftovers (fresh: not yet removed), the tally";
}

TEST(DiskCache, ListingAndClearingSayWhatTheyCouldNotDo) {
  const std::string dir = scratchDir() + "/cache";
  // A directory that does not exist is an empty cache.
  EXPECT_TRUE(llvm::cantFail(DiskCache(dir, kUnbounded).list()).empty());
  EXPECT_EQ(llvm::cantFail(DiskCache(dir, kUnbounded).clear()), 0u);
  // A file where the directory should be cannot be listed or cleared.
  writeFile(dir, "not a directory");
  auto listed = DiskCache(dir, kUnbounded).list();
  EXPECT_EQ(test::errorText(listed), dir + ": Not a directory");
  auto cleared = DiskCache(dir, kUnbounded).clear();
  EXPECT_EQ(test::errorText(cleared), dir + ": Not a directory");
  std::remove(dir.c_str());
  // What clear cannot delete it names, and deletes the rest.
  DiskCache cache(dir, kUnbounded);
  cache.store(keyOf("one"), "", "binary", 1);
  cache.store(keyOf("two"), "", "binary", 1);
  const std::string inTheWay = entryPath(dir, keyOf("three"));
  ASSERT_EQ(mkdir(inTheWay.c_str(), 0700), 0);
  cleared = cache.clear();
  EXPECT_EQ(test::errorText(cleared), "deleted 2 files, but not 1 (" + inTheWay + ": Is a directory)");
  EXPECT_FALSE(exists(entryPath(dir, keyOf("one"))));
  EXPECT_FALSE(exists(entryPath(dir, keyOf("two"))));
}

// Sets a file's last use `seconds` ago.
void usedAgo(const std::string &path, int seconds) {
  const struct timespec times[2] = {{time(nullptr) - seconds, 0}, {time(nullptr) - seconds, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

TEST(DiskCache, EvictionKeepsTheBoundAndTheRecentlyUsed) {
  const std::string dir = scratchDir();
  const std::string binary(4000, 'x');
  // Room for three entries (header, empty description, binary), not four.
  DiskCache cache(dir, 3 * (64 + binary.size()) + 100);
  int ago = 400;
  for (const char *k : {"k0", "k1", "k2"}) {
    cache.store(keyOf(k), "", binary, 1);
    usedAgo(entryPath(dir, keyOf(k)), ago -= 100);  // k0 the oldest
  }
  EXPECT_TRUE(cache.load(keyOf("k0")));  // used: now the most recent
  cache.store(keyOf("k3"), "", binary, 1);
  EXPECT_EQ(cache.statistics().evicted, 1u);
  EXPECT_FALSE(exists(entryPath(dir, keyOf("k1")))) << "the least recently used goes";
  for (const char *k : {"k0", "k2", "k3"}) EXPECT_TRUE(exists(entryPath(dir, keyOf(k)))) << k;
  uint64_t total = 0;
  for (const EntryFile &f : llvm::cantFail(cache.list())) total += f.size;
  EXPECT_LE(total, 3 * (64 + binary.size()) + 100);

  // An entry bigger than the whole bound is not stored at all.
  cache.store(keyOf("huge"), "", std::string(20000, 'y'), 1);
  EXPECT_FALSE(exists(entryPath(dir, keyOf("huge"))));
  EXPECT_TRUE(exists(entryPath(dir, keyOf("k3"))));
}

TEST(DiskCache, LeftoversOfKilledWritersAreRemovedWhenOld) {
  const std::string dir = scratchDir();
  DiskCache cache(dir, kUnbounded, DiskCache::kDefaultBuildWait, /*sweepEvery=*/1);
  cache.store(keyOf("first"), "", "binary", 1);
  // Named as store() names them: .tmp-<key>-<pid>-<n>.
  const std::string stale = dir + "/.tmp-" + keyOf("a").hex() + "-99-0", fresh = dir + "/.tmp-" + keyOf("b").hex() + "-99-1";
  // Old files of the user's that only look alike are not the cache's (DEVDL_CACHE_DIR may be a
  // directory of other things).
  const std::string users = dir + "/.tmp-notes", shortKey = dir + "/.tmp-0123-99-0";
  writeFile(stale, "half an entry");
  writeFile(fresh, "being written");
  writeFile(users, "mine");
  writeFile(shortKey, "mine too");
  const struct timespec hourAgo[2] = {{time(nullptr) - 3600, 0}, {time(nullptr) - 3600, 0}};
  for (const std::string &old : {stale, users, shortKey}) ASSERT_EQ(utimensat(AT_FDCWD, old.c_str(), hourAgo, 0), 0);
  cache.store(keyOf("second"), "", "binary", 1);
  EXPECT_FALSE(exists(stale));
  EXPECT_TRUE(exists(fresh));
  EXPECT_TRUE(exists(users));
  EXPECT_TRUE(exists(shortKey));
  EXPECT_EQ(llvm::cantFail(cache.list()).size(), 2u);
  EXPECT_EQ(llvm::cantFail(cache.clear()), 3u);  // two entries and the fresh temporary file
  EXPECT_TRUE(llvm::cantFail(cache.list()).empty());
  EXPECT_TRUE(exists(users));
  EXPECT_FALSE(exists(dir + "/.size")) << "the tally goes with the entries";
}

// A store reads the tally, not the directory (a remote hit on a cache of 5,000 entries took 12 ms
// when each store read them all): the directory is swept where the tally says the cache is over
// its bound, and every so many stores. Processes storing at once count each other's entries.
TEST(DiskCache, AStoreSweepsOnlyWhereTheTallySays) {
  const std::string dir = scratchDir();
  const std::string binary(1000, 'x');
  const uint64_t entry = 64 + binary.size();
  DiskCache cache(dir, 5 * entry, DiskCache::kDefaultBuildWait, /*sweepEvery=*/3);
  cache.store(keyOf("k0"), "", binary, 1);  // no tally yet: the directory is read
  const std::string stale = dir + "/.tmp-" + keyOf("a").hex() + "-99-0";
  writeFile(stale, "half an entry");
  const struct timespec hourAgo[2] = {{time(nullptr) - 3600, 0}, {time(nullptr) - 3600, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, stale.c_str(), hourAgo, 0), 0);
  cache.store(keyOf("k1"), "", binary, 1);
  DiskCache(dir, 5 * entry, DiskCache::kDefaultBuildWait, 3).store(keyOf("k2"), "", binary, 1);  // another process's
  EXPECT_TRUE(exists(stale)) << "two stores since the sweep, within the bound: the directory is not read";
  EXPECT_EQ(std::strtoull(readFile(dir + "/.size").c_str(), nullptr, 10), 3 * entry) << "all three counted";
  cache.store(keyOf("k3"), "", binary, 1);
  EXPECT_FALSE(exists(stale)) << "the third store since the sweep sweeps";
  // Over the bound by the tally: the store sweeps and evicts at once, whatever the count.
  cache.store(keyOf("k4"), "", binary, 1);
  EXPECT_EQ(cache.statistics().evicted, 0u);
  cache.store(keyOf("k5"), "", binary, 1);
  EXPECT_EQ(cache.statistics().evicted, 1u);
  EXPECT_EQ(llvm::cantFail(cache.list()).size(), 5u);
  EXPECT_EQ(std::strtoull(readFile(dir + "/.size").c_str(), nullptr, 10), 5 * entry) << "the sweep's own count";
}

}  // namespace
}  // namespace devdl::store
