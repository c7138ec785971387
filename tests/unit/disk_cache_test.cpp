// The disk cache on its own: entries round-trip, damage is caught and deleted, untrusted files
// and directories are not used, the bound holds, and writers killed or running side by side in
// other processes leave nothing torn behind. End-to-end use with real programs is in
// tests/e2e/disk_cache_test.cpp.
#include "cache/disk_cache.h"
#include "test_support.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <random>
#include <thread>

namespace devdl::cache {
namespace {

using test::readFile;
using test::scratchDir;
using test::writeFile;

constexpr uint64_t kUnbounded = uint64_t(1) << 40;

Key keyOf(std::string_view what) { return KeyBuilder().add(what).finish(); }

std::string entryName(const Key &key) { return key.hex() + ".devdl-cache"; }
std::string entryPath(const std::string &dir, const Key &key) { return dir + "/" + entryName(key); }

bool exists(const std::string &path) { return access(path.c_str(), F_OK) == 0; }

mode_t modeOf(const std::string &path) {
  struct stat st{};
  stat(path.c_str(), &st);
  return st.st_mode & 07777;
}

// Files in `dir` whose names start with `prefix` (hidden ones too: temporary files are).
std::vector<std::string> filesIn(const std::string &dir, std::string_view prefix = "") {
  std::vector<std::string> names;
  if (DIR *d = opendir(dir.c_str())) {
    while (const dirent *e = readdir(d))
      if (const std::string_view name = e->d_name; name.starts_with(prefix) && name != "." && name != "..")
        names.push_back(e->d_name);
    closedir(d);
  }
  return names;
}

// A binary whose bytes say which key and which write made it, so a reader can tell a torn or
// mixed-up entry from a whole one.
std::string patternFor(unsigned key, uint32_t write, size_t size) {
  std::string bytes(size, static_cast<char>('a' + key));
  std::memcpy(bytes.data(), &write, sizeof write);
  return bytes;
}

bool matchesPattern(std::string_view bytes, unsigned key, size_t size) {
  if (bytes.size() != size) return false;
  return std::all_of(bytes.begin() + sizeof(uint32_t), bytes.end(), [&](char c) { return c == static_cast<char>('a' + key); });
}

TEST(DiskCacheKey, PartsCannotRunIntoEachOther) {
  EXPECT_EQ(keyOf("x"), keyOf("x"));
  EXPECT_NE(KeyBuilder().add("ab").add("c").finish(), KeyBuilder().add("a").add("bc").finish());
  EXPECT_NE(KeyBuilder().add(uint64_t(1)).finish(), KeyBuilder().add(uint64_t(2)).finish());
  EXPECT_EQ(keyOf("x").hex().size(), 32u);
}

TEST(DiskCacheKey, HexIsTheHighThenTheLowHalfInFullWidth) {
  EXPECT_EQ((Key{.low = 0xabcdef, .high = 0x0123456789abcdef}).hex(), "0123456789abcdef0000000000abcdef");
  EXPECT_EQ(Key{}.hex(), std::string(32, '0'));
}

TEST(DiskCache, StoredEntryLoadsBackWithWhatItCost) {
  const std::string dir = scratchDir() + "/cache";
  DiskCache cache(dir, kUnbounded);
  EXPECT_FALSE(cache.load(keyOf("one")));
  cache.store(keyOf("one"), "device\nimage", std::string("bin\0ary", 7), 12345);
  auto entry = cache.load(keyOf("one"));
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->binary(), std::string("bin\0ary", 7));
  EXPECT_EQ(entry->description(), "device\nimage");
  EXPECT_EQ(entry->buildNanoseconds, 12345u);
  EXPECT_FALSE(cache.load(keyOf("two")));
  EXPECT_EQ(cache.statistics().hits, 1u);
  EXPECT_EQ(cache.statistics().misses, 2u);
  EXPECT_EQ(cache.statistics().stores, 1u);
  EXPECT_GT(cache.statistics().bytesRead, 7u);
  // A second cache object (another process, in effect) sees the entry.
  DiskCache other(dir, kUnbounded);
  EXPECT_TRUE(other.load(keyOf("one")));
}

TEST(DiskCache, SummariesAreEntriesCountedApart) {
  const std::string dir = scratchDir() + "/cache";
  DiskCache cache(dir, kUnbounded);
  EXPECT_FALSE(cache.loadSummary(keyOf("file")));
  cache.storeSummary(keyOf("file"), "image summary of lib.spv", "summary");
  auto entry = cache.loadSummary(keyOf("file"));
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->binary(), "summary");
  EXPECT_EQ(cache.summaryStatistics().hits, 1u);
  EXPECT_EQ(cache.summaryStatistics().misses, 1u);
  EXPECT_EQ(cache.summaryStatistics().stores, 1u);
  EXPECT_EQ(cache.statistics().hits + cache.statistics().misses + cache.statistics().stores, 0u)
      << "the programs' figures are the programs'";
  const auto files = llvm::cantFail(cache.list());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].description, "image summary of lib.spv");
}

TEST(DiskCache, AnEntryTheBackendRefusesIsAMissNotAHit) {
  DiskCache cache(scratchDir(), kUnbounded);
  cache.store(keyOf("one"), "", "binary", 1);
  ASSERT_TRUE(cache.load(keyOf("one")));
  cache.discard(keyOf("one"), "refused by the driver");
  EXPECT_EQ(cache.statistics().hits, 0u);
  EXPECT_EQ(cache.statistics().misses, 1u);
  EXPECT_EQ(cache.statistics().rejected, 1u);
  EXPECT_FALSE(cache.load(keyOf("one")));
}

// A FIFO in an entry's place (put there by someone who can write the directory's parent) is not
// trusted, and neither a load nor a listing waits for a writer to open it.
TEST(DiskCache, AFifoInAnEntrysPlaceDoesNotHangTheLoad) {
  const std::string dir = scratchDir();
  DiskCache cache(dir, kUnbounded);
  cache.store(keyOf("other"), "", "binary", 1);  // makes the directory
  const std::string path = entryPath(dir, keyOf("fifo"));
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0) << std::strerror(errno);
  auto listed = std::async(std::launch::async, [&] {
    DiskCache reader(dir, kUnbounded);
    const bool loaded = reader.load(keyOf("fifo")).has_value();
    return std::make_pair(loaded, llvm::cantFail(reader.list()));
  });
  if (listed.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    // Release the reader before failing: a writer opening the FIFO ends each of its waits (the
    // load's open, then the listing's).
    while (listed.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready)
      close(open(path.c_str(), O_WRONLY | O_NONBLOCK));
    FAIL() << "the load waited on the FIFO";
  }
  const auto [loaded, files] = listed.get();
  EXPECT_FALSE(loaded);
  ASSERT_EQ(files.size(), 2u);
  const EntryFile &fifo = files[0].path == path ? files[0] : files[1];
  EXPECT_EQ(fifo.problem, "not a regular file");
  EXPECT_TRUE(exists(path)) << "what is not trusted is left alone";
}

TEST(DiskCache, BinariesComeBackAlignedForTheDriver) {
  // The driver reads the binary where it lies (cuModuleLoadData): small entries are read into
  // an allocation, large ones mapped; either way the binary starts 64 bytes in.
  DiskCache cache(scratchDir(), kUnbounded);
  for (size_t size : {size_t(100), size_t(1) << 20}) {
    SCOPED_TRACE(size);
    const std::string binary(size, 'b');
    cache.store(keyOf(std::to_string(size)), "an odd-sized description", binary, 1);
    auto entry = cache.load(keyOf(std::to_string(size)));
    ASSERT_TRUE(entry);
    EXPECT_EQ(entry->binary(), binary);
    EXPECT_EQ(entry->description(), "an odd-sized description");
    EXPECT_EQ(reinterpret_cast<uintptr_t>(entry->binary().data()) % 16, 0u);
  }
}

TEST(DiskCache, DirectoriesAndEntriesArePrivateToTheUser) {
  const std::string base = scratchDir();
  DiskCache cache(base + "/a/b/devdl", kUnbounded);
  cache.store(keyOf("k"), "", "binary", 1);
  for (const char *dir : {"/a", "/a/b", "/a/b/devdl"}) EXPECT_EQ(modeOf(base + dir), 0700u) << dir;
  EXPECT_EQ(modeOf(entryPath(base + "/a/b/devdl", keyOf("k"))), 0600u);
}

TEST(DiskCache, DamagedEntriesAreDeletedNeverLoaded) {
  struct Damage {
    const char *what;
    std::function<void(std::string &)> apply;
  };
  const std::vector<Damage> damages = {
      {"a byte of the binary flipped", [](std::string &f) { f[64 + 500] ^= 0x10; }},
      {"a byte of the description flipped", [](std::string &f) { f[f.size() - 3] ^= 0x10; }},
      {"a byte of the key flipped", [](std::string &f) { f[17] ^= 0x01; }},
      {"a byte of the checksum flipped", [](std::string &f) { f[60] ^= 0x80; }},
      {"a byte of the build time flipped", [](std::string &f) { f[50] ^= 0x01; }},
      {"the magic changed", [](std::string &f) { f[0] = 'X'; }},
      {"cut in half", [](std::string &f) { f.resize(f.size() / 2); }},
      {"cut inside the header", [](std::string &f) { f.resize(10); }},
      {"emptied", [](std::string &f) { f.clear(); }},
      {"a byte added", [](std::string &f) { f.push_back('\0'); }},
  };
  for (const Damage &damage : damages) {
    SCOPED_TRACE(damage.what);
    const std::string dir = scratchDir();
    DiskCache writer(dir, kUnbounded);
    writer.store(keyOf("k"), "description", std::string(1000, 'b'), 7);
    const std::string path = entryPath(dir, keyOf("k"));
    std::string bytes = readFile(path);
    damage.apply(bytes);
    writeFile(path, bytes);
    chmod(path.c_str(), 0600);

    DiskCache reader(dir, kUnbounded);
    EXPECT_FALSE(reader.load(keyOf("k")));
    EXPECT_FALSE(exists(path)) << "a bad entry is deleted";
    EXPECT_EQ(reader.statistics().rejected, 1u);
    reader.store(keyOf("k"), "description", std::string(1000, 'b'), 7);
    auto rebuilt = reader.load(keyOf("k"));
    ASSERT_TRUE(rebuilt);
    EXPECT_EQ(rebuilt->binary(), std::string(1000, 'b'));
  }
}

TEST(DiskCache, AnEntryUnderAnotherKeysNameIsRejected) {
  const std::string dir = scratchDir();
  DiskCache cache(dir, kUnbounded);
  cache.store(keyOf("a"), "", "binary of a", 1);
  writeFile(entryPath(dir, keyOf("b")), readFile(entryPath(dir, keyOf("a"))));
  chmod(entryPath(dir, keyOf("b")).c_str(), 0600);
  EXPECT_FALSE(cache.load(keyOf("b")));
  const auto files = llvm::cantFail(cache.list());
  ASSERT_EQ(files.size(), 1u);  // the bad one was deleted
  EXPECT_EQ(files[0].problem, "");
}

TEST(DiskCache, EntriesOthersCouldHaveWrittenAreNotTrusted) {
  const std::string dir = scratchDir();
  DiskCache cache(dir, kUnbounded);
  cache.store(keyOf("k"), "", "binary", 1);
  const std::string path = entryPath(dir, keyOf("k"));
  ASSERT_EQ(chmod(path.c_str(), 0622), 0);
  EXPECT_FALSE(cache.load(keyOf("k")));
  EXPECT_TRUE(exists(path)) << "not ours to judge: left, and replaced by the next store";
  ASSERT_EQ(llvm::cantFail(cache.list()).size(), 1u);
  EXPECT_EQ(llvm::cantFail(cache.list())[0].problem, "writable by others");
  cache.store(keyOf("k"), "", "binary", 1);
  EXPECT_TRUE(cache.load(keyOf("k")));
}

TEST(DiskCache, EntriesOfAnotherUserAreNotTrusted) {
  if (geteuid() != 0) GTEST_SKIP() << "giving a file to another user needs root";
  const std::string dir = scratchDir();
  DiskCache cache(dir, kUnbounded);
  cache.store(keyOf("k"), "", "binary", 1);
  ASSERT_EQ(chown(entryPath(dir, keyOf("k")).c_str(), 65534, 65534), 0);
  EXPECT_FALSE(cache.load(keyOf("k")));
  EXPECT_EQ(llvm::cantFail(cache.list())[0].problem, "owned by user 65534, not by this user");
}

TEST(DiskCache, ADirectoryOthersCanWriteIsNotUsed) {
  const std::string dir = scratchDir() + "/shared";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  DiskCache cache(dir, kUnbounded);
  EXPECT_FALSE(cache.load(keyOf("k")));
  EXPECT_FALSE(cache.enabled());
  cache.store(keyOf("k"), "", "binary", 1);
  EXPECT_TRUE(filesIn(dir).empty());
}

TEST(DiskCache, AnUnwritableDirectoryDegradesToNoCache) {
  // /proc/self/fdinfo: an existing directory of this user that nobody, root included, can
  // create files in (chmod alone would not stop root).
  DiskCache cache("/proc/self/fdinfo", kUnbounded);
  EXPECT_FALSE(cache.load(keyOf("k")));
  cache.store(keyOf("k"), "", "binary", 1);
  EXPECT_EQ(cache.statistics().stores, 0u);
  cache.store(keyOf("k2"), "", "binary", 1);  // and no second attempt
  EXPECT_EQ(cache.statistics().stores, 0u);
  // A path that cannot be made at all.
  DiskCache nowhere("/proc/devdl-cache-test", kUnbounded);
  EXPECT_FALSE(nowhere.load(keyOf("k")));
  EXPECT_FALSE(nowhere.enabled());
}

// A full disk fails writes part way. A file size limit fails them the same way (a short write,
// then EFBIG) without a file system of the test's own; it is set in a child, which says through
// its exit status what went wrong.
TEST(DiskCache, AFullDiskDegradesToNoCache) {
  const std::string dir = scratchDir();
  DiskCache(dir, kUnbounded).store(keyOf("stored before"), "", "binary", 1);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    signal(SIGXFSZ, SIG_IGN);  // the write fails with EFBIG rather than killing the process
    const rlimit limit{16384, 16384};
    setrlimit(RLIMIT_FSIZE, &limit);
    DiskCache cache(dir, kUnbounded);
    cache.store(keyOf("big"), "", std::string(65536, 'x'), 1);  // fails after 16 KB
    cache.store(keyOf("small"), "", "binary", 1);                // would fit; storing has stopped
    auto loaded = cache.load(keyOf("stored before"));
    _exit((cache.statistics().stores != 0 ? 1 : 0) | (!loaded || loaded->binary() != "binary" ? 2 : 0) |
          (!cache.enabled() ? 4 : 0));
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: an entry was stored, 2: the entry stored before did not load, "
                                       "4: loading was turned off";
  // Neither the torn temporary file nor the small entry is there (the tally is).
  EXPECT_EQ(filesIn(dir, entryName(keyOf("stored before")).substr(0, 32)),
            std::vector<std::string>{entryName(keyOf("stored before"))});
  EXPECT_TRUE(filesIn(dir, ".tmp-").empty());
}

// The directory is checked once and then used through what was opened: a path made to lead
// elsewhere afterwards (the directory renamed, another put in its place) does not move the cache.
TEST(DiskCache, TheDirectoryCheckedIsTheDirectoryUsed) {
  const std::string dir = scratchDir() + "/cache", moved = dir + ".moved";
  DiskCache cache(dir, kUnbounded);
  cache.store(keyOf("one"), "", "binary", 1);
  ASSERT_EQ(rename(dir.c_str(), moved.c_str()), 0);
  ASSERT_EQ(mkdir(dir.c_str(), 0777), 0);
  cache.store(keyOf("two"), "", "binary", 1);
  EXPECT_EQ(cache.statistics().stores, 2u);
  EXPECT_TRUE(exists(entryPath(moved, keyOf("two"))));
  EXPECT_TRUE(filesIn(dir).empty());
  EXPECT_TRUE(cache.load(keyOf("one")));
}

// A program that closes every descriptor and opens others (a daemon starting) may give the
// cache's number to another directory: the cache does not write there, and opens its own again.
TEST(DiskCache, ADescriptorThatIsNoLongerTheCachesIsLetGo) {
  const std::string scratch = scratchDir(), dir = scratch + "/cache", elsewhere = scratch + "/elsewhere";
  ASSERT_EQ(mkdir(elsewhere.c_str(), 0700), 0);
  DiskCache cache(dir, kUnbounded);
  cache.store(keyOf("one"), "", "binary", 1);
  int held = -1;
  for (const std::string &name : filesIn("/proc/self/fd")) {
    char target[4096];
    const ssize_t n = readlink(("/proc/self/fd/" + name).c_str(), target, sizeof target - 1);
    if (n > 0 && std::string_view(target, static_cast<size_t>(n)) == dir) held = std::stoi(name);
  }
  ASSERT_GE(held, 0) << "the cache holds its directory open";
  const int other = open(elsewhere.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_EQ(dup2(other, held), held);
  close(other);
  cache.store(keyOf("two"), "", "binary", 1);
  EXPECT_TRUE(filesIn(elsewhere).empty());
  EXPECT_TRUE(exists(entryPath(dir, keyOf("two"))));
  EXPECT_TRUE(cache.load(keyOf("one")));
  close(held);
}

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

// A child that writes entries of 8 MiB for four keys until it is killed.
constexpr size_t kKilledEntrySize = 8 << 20;

[[noreturn]] void writeForever(const std::string &dir) {
  DiskCache cache(dir, kUnbounded);
  for (uint32_t write = 0;; ++write) {
    const unsigned key = write % 4;
    cache.store(keyOf("key" + std::to_string(key)), "", patternFor(key, write, kKilledEntrySize), 1);
  }
}

TEST(DiskCache, WritersKilledMidWriteLeaveNoEntryThatIsUsed) {
  const std::string dir = scratchDir();
  // How long one entry takes to write here, so that the kills land before, in and after writes.
  const auto start = std::chrono::steady_clock::now();
  DiskCache(dir, kUnbounded).store(keyOf("timing"), "", std::string(kKilledEntrySize, 't'), 1);
  const auto write = std::chrono::steady_clock::now() - start;
  std::mt19937 random(42);
  for (int round = 0; round <= 30; ++round) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) writeForever(dir);
    // The last round is long enough for whole entries, so that there are some to check.
    const auto range = std::chrono::duration_cast<std::chrono::microseconds>(write * (round == 30 ? 20 : 3));
    std::this_thread::sleep_for(std::chrono::microseconds(1000 + random() % (range.count() + 1)));
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status));
  }
  DiskCache cache(dir, kUnbounded);
  const auto files = llvm::cantFail(cache.list());
  EXPECT_GT(files.size(), 1u) << "the writers should have finished some entries";
  for (const EntryFile &file : files) EXPECT_EQ(file.problem, "") << file.path;
  for (unsigned key = 0; key < 4; ++key) {
    if (auto entry = cache.load(keyOf("key" + std::to_string(key)))) {
      EXPECT_TRUE(matchesPattern(entry->binary(), key, kKilledEntrySize)) << "key " << key;
    }
  }
  EXPECT_EQ(cache.statistics().rejected, 0u);
}

TEST(DiskCache, ProcessesReadingAndWritingOneCacheAtOnce) {
  const std::string dir = scratchDir();
  constexpr size_t kBinary = 256 * 1024;
  // A bound of four entries for six keys: entries are evicted while others read them.
  const uint64_t bound = 4 * (kBinary + 64);
  std::vector<pid_t> children;
  for (int process = 0; process < 8; ++process) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      DiskCache cache(dir, bound);
      std::mt19937 random(process);
      for (uint32_t op = 0; op < 50; ++op) {
        const unsigned key = random() % 6;
        if (auto entry = cache.load(keyOf("key" + std::to_string(key)))) {
          if (!matchesPattern(entry->binary(), key, kBinary)) _exit(3);
        } else {
          cache.store(keyOf("key" + std::to_string(key)), "", patternFor(key, op, kBinary), 1);
        }
      }
      _exit(cache.statistics().rejected == 0 ? 0 : 4);
    }
    children.push_back(child);
  }
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
  DiskCache cache(dir, bound);
  for (const EntryFile &file : llvm::cantFail(cache.list())) EXPECT_EQ(file.problem, "") << file.path;
  EXPECT_TRUE(filesIn(dir, ".tmp-").empty());
}

// A process that holds `key`'s build lock until told: release(true) stores an entry first,
// release(false) lets go without one, kill() ends it as a crash would.
class LockHolder {
 public:
  LockHolder(const std::string &dir, const Key &key) {
    int ready[2], told[2];
    if (pipe(ready) != 0 || pipe(told) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      DiskCache cache(dir, kUnbounded);
      BuildTurn turn = cache.awaitTurn(key);
      char byte = turn.lock ? 'y' : 'n';
      if (write(ready[1], &byte, 1) != 1 || read(told[0], &byte, 1) != 1) _exit(1);
      if (byte == 's') cache.store(key, "", "built by the holder", 1);
      turn.lock.reset();
      _exit(0);
    }
    close(ready[1]);
    close(told[0]);
    char byte = 0;
    held_ = read(ready[0], &byte, 1) == 1 && byte == 'y';
    close(ready[0]);
    told_ = told[1];
  }
  ~LockHolder() {
    if (pid_ > 0) kill();
    close(told_);
  }
  bool held() const { return held_; }
  void release(bool storing) {
    const char byte = storing ? 's' : 'n';
    EXPECT_EQ(write(told_, &byte, 1), 1);
    reap();
  }
  void kill() {
    ::kill(pid_, SIGKILL);
    reap();
  }

 private:
  void reap() {
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  pid_t pid_ = -1;
  int told_ = -1;
  bool held_ = false;
};

TEST(DiskCacheBuildLock, AProcessThatMissesWaitsForTheBuilderAndLoadsItsEntry) {
  const std::string dir = scratchDir();
  const Key key = keyOf("program");
  LockHolder holder(dir, key);
  ASSERT_TRUE(holder.held());
  DiskCache cache(dir, kUnbounded);
  ASSERT_FALSE(cache.load(key));
  auto waiting = std::async(std::launch::async, [&] { return cache.awaitTurn(key); });
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
      << "it returned while the holder was still building";
  holder.release(true);
  BuildTurn turn = waiting.get();
  ASSERT_TRUE(turn.entry);
  EXPECT_EQ(turn.entry->binary(), "built by the holder");
  EXPECT_EQ(cache.statistics().hits, 1u);
  EXPECT_EQ(cache.statistics().misses, 0u) << "the miss came to a hit";
  EXPECT_EQ(cache.statistics().waits, 1u);
  EXPECT_GT(cache.statistics().waitNanoseconds, 0u);
  turn.lock.reset();
  EXPECT_TRUE(filesIn(dir, ".lock-").empty());
}

TEST(DiskCacheBuildLock, ABuilderThatStoresNothingHandsTheTurnOn) {
  const std::string dir = scratchDir();
  const Key key = keyOf("program");
  LockHolder holder(dir, key);
  ASSERT_TRUE(holder.held());
  DiskCache cache(dir, kUnbounded);
  ASSERT_FALSE(cache.load(key));
  auto waiting = std::async(std::launch::async, [&] { return cache.awaitTurn(key); });
  holder.release(false);  // its build failed, say
  BuildTurn turn = waiting.get();
  EXPECT_FALSE(turn.entry);
  EXPECT_TRUE(turn.lock) << "the next one builds, under the lock";
  EXPECT_EQ(cache.statistics().misses, 1u);
}

TEST(DiskCacheBuildLock, ALockHeldByAKilledProcessIsTakenOverAtOnce) {
  const std::string dir = scratchDir();
  const Key key = keyOf("program");
  LockHolder holder(dir, key);
  ASSERT_TRUE(holder.held());
  holder.kill();
  ASSERT_EQ(filesIn(dir, ".lock-").size(), 1u) << "a killed builder leaves its lock file";
  DiskCache cache(dir, kUnbounded);
  BuildTurn turn = cache.awaitTurn(key);
  EXPECT_TRUE(turn.lock);
  EXPECT_FALSE(turn.entry);
  EXPECT_EQ(cache.statistics().waits, 0u) << "the kernel let go of the dead process's lock";
  // The file names its new holder, for what waiters say, over what the dead one wrote.
  const std::vector<std::string> locks = filesIn(dir, ".lock-");
  ASSERT_EQ(locks.size(), 1u);
  EXPECT_EQ(std::strtol(readFile(dir + "/" + locks[0]).c_str(), nullptr, 10), getpid());
  turn.lock.reset();
  EXPECT_TRUE(filesIn(dir, ".lock-").empty());
}

TEST(DiskCacheBuildLock, AWaiterPastTheBoundBuildsWithoutTheLock) {
  const std::string dir = scratchDir();
  const Key key = keyOf("program");
  LockHolder holder(dir, key);  // stuck: it never stores
  ASSERT_TRUE(holder.held());
  DiskCache cache(dir, kUnbounded, std::chrono::milliseconds(300));
  BuildTurn turn = cache.awaitTurn(key);
  EXPECT_FALSE(turn.lock);
  EXPECT_FALSE(turn.entry);
  EXPECT_EQ(cache.statistics().waits, 1u);
  EXPECT_GE(cache.statistics().waitNanoseconds, 300'000'000u);
  cache.store(key, "", "built by the waiter", 1);
  ASSERT_TRUE(cache.load(key));
  EXPECT_EQ(cache.load(key)->binary(), "built by the waiter");
}

TEST(DiskCacheBuildLock, ThreadsOfOneProcessDoNotWaitForEachOther) {
  // The loader has them wait for each other (support/waiting.h).
  DiskCache cache(scratchDir(), kUnbounded);
  const Key key = keyOf("program");
  BuildTurn first = cache.awaitTurn(key);
  ASSERT_TRUE(first.lock);
  BuildTurn second = cache.awaitTurn(key);
  EXPECT_FALSE(second.lock);
  EXPECT_EQ(cache.statistics().waits, 0u);
  first.lock.reset();
  EXPECT_TRUE(cache.awaitTurn(key).lock);
}

TEST(DiskCacheBuildLock, WithoutACacheNothingIsLockedOrWaitedFor) {
  DiskCache cache("", kUnbounded);
  BuildTurn turn = cache.awaitTurn(keyOf("program"));
  EXPECT_FALSE(turn.lock);
  EXPECT_FALSE(turn.entry);
}

TEST(DiskCacheBuildLock, ProcessesThatMissOneKeyBuildItOnce) {
  const std::string dir = scratchDir();
  const Key key = keyOf("program");
  int start[2];
  ASSERT_EQ(pipe(start), 0);
  std::vector<pid_t> children;
  for (int process = 0; process < 8; ++process) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(start[1]);
      char byte;
      if (read(start[0], &byte, 1) != 0) _exit(2);  // all start when the parent closes the pipe
      DiskCache cache(dir, kUnbounded);
      if (auto entry = cache.load(key)) _exit(entry->binary() == "built once" ? 12 : 3);
      BuildTurn turn = cache.awaitTurn(key);
      if (turn.entry) {
        const bool right = turn.entry->binary() == "built once";
        turn.lock.reset();
        _exit(right ? 11 : 3);
      }
      if (!turn.lock) _exit(4);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // building
      cache.store(key, "", "built once", 1);
      turn.lock.reset();
      _exit(10);
    }
    children.push_back(child);
  }
  close(start[0]);
  close(start[1]);
  int built = 0, loaded = 0;
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
    const int code = WEXITSTATUS(status);
    EXPECT_TRUE(code >= 10 && code <= 12) << "exit " << code;
    (code == 10 ? built : loaded) += 1;
  }
  EXPECT_EQ(built, 1);
  EXPECT_EQ(loaded, 7);
  EXPECT_TRUE(filesIn(dir, ".lock-").empty());
}

TEST(DiskCacheBuildLock, LockFilesNoProcessHoldsAreRemoved) {
  const std::string dir = scratchDir();
  LockHolder building(dir, keyOf("building"));
  ASSERT_TRUE(building.held());
  LockHolder dead(dir, keyOf("dead"));
  ASSERT_TRUE(dead.held());
  dead.kill();
  writeFile(dir + "/.lock-notes", "the user's");
  DiskCache cache(dir, kUnbounded);
  EXPECT_EQ(llvm::cantFail(cache.clear()), 1u) << "the dead builder's lock file";
  EXPECT_TRUE(exists(dir + "/.lock-" + keyOf("building").hex())) << "a build under way keeps its lock";
  EXPECT_TRUE(exists(dir + "/.lock-notes"));
  // Stores clean up after killed builders too.
  LockHolder killed(dir, keyOf("killed"));
  ASSERT_TRUE(killed.held());
  killed.kill();
  cache.store(keyOf("other"), "", "binary", 1);
  EXPECT_FALSE(exists(dir + "/.lock-" + keyOf("killed").hex()));
  EXPECT_TRUE(exists(dir + "/.lock-" + keyOf("building").hex()));
  building.release(false);
  EXPECT_FALSE(exists(dir + "/.lock-" + keyOf("building").hex())) << "its holder deletes it";
}

class DiskCacheEnvironment : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char *name : kNames)
      if (const char *value = std::getenv(name)) saved_.emplace_back(name, value);
    for (const char *name : kNames) unsetenv(name);
  }
  void TearDown() override {
    for (const char *name : kNames) unsetenv(name);
    for (const auto &[name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
  }

 private:
  static constexpr const char *kNames[] = {"DEVDL_CACHE", "DEVDL_CACHE_DIR", "XDG_CACHE_HOME", "HOME",
                                           "DEVDL_CACHE_MAX_SIZE", "DEVDL_CACHE_WAIT"};
  std::vector<std::pair<std::string, std::string>> saved_;
};

// The directory the environment names, or why there is none.
std::string directoryOrWhy() {
  llvm::Expected<std::string> dir = DiskCache::directoryFromEnvironment();
  return dir ? *dir : "none: " + llvm::toString(dir.takeError());
}

TEST_F(DiskCacheEnvironment, DirectoryAsTheXdgSpecificationSays) {
  EXPECT_EQ(directoryOrWhy(), "none: no DEVDL_CACHE_DIR, XDG_CACHE_HOME or HOME");
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(directoryOrWhy(), "/home/u/.cache/devdl");
  setenv("XDG_CACHE_HOME", "relative/ignored", 1);
  EXPECT_EQ(directoryOrWhy(), "/home/u/.cache/devdl");
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(directoryOrWhy(), "/xdg/devdl");
  setenv("DEVDL_CACHE_DIR", "/mine", 1);
  EXPECT_EQ(directoryOrWhy(), "/mine");
  setenv("DEVDL_CACHE", "0", 1);
  EXPECT_EQ(directoryOrWhy(), "none: DEVDL_CACHE=0");
  setenv("DEVDL_CACHE", "1", 1);
  EXPECT_EQ(directoryOrWhy(), "/mine");
}

TEST_F(DiskCacheEnvironment, SizeBoundInBytesOrWithASuffix) {
  EXPECT_EQ(DiskCache::maxSizeFromEnvironment(), uint64_t(1) << 30);
  for (auto [text, bytes] : std::vector<std::pair<const char *, uint64_t>>{
           {"4096", 4096}, {"10K", 10240}, {"3M", 3 << 20}, {"2G", uint64_t(2) << 30}, {"bogus", uint64_t(1) << 30},
           {"5X", uint64_t(1) << 30}, {"-1", uint64_t(1) << 30}, {" -1", uint64_t(1) << 30}, {"+5", uint64_t(1) << 30},
           {"K", uint64_t(1) << 30}, {"0x10", uint64_t(1) << 30}}) {
    setenv("DEVDL_CACHE_MAX_SIZE", text, 1);
    EXPECT_EQ(DiskCache::maxSizeFromEnvironment(), bytes) << text;
  }
}

TEST_F(DiskCacheEnvironment, BuildWaitInSeconds) {
  using std::chrono::milliseconds;
  // Unset, no bound: a process waits for another's build while that one lives.
  EXPECT_EQ(DiskCache::kDefaultBuildWait, milliseconds::max());
  EXPECT_EQ(DiskCache::buildWaitFromEnvironment(), DiskCache::kDefaultBuildWait);
  for (auto [text, wait] : std::vector<std::pair<const char *, milliseconds>>{
           {"5", milliseconds(5000)}, {"0.25", milliseconds(250)}, {"0", milliseconds(0)},
           {"-1", DiskCache::kDefaultBuildWait}, {"soon", DiskCache::kDefaultBuildWait},
           {"5s", DiskCache::kDefaultBuildWait}, {"1e9", DiskCache::kDefaultBuildWait},
           {"nan", DiskCache::kDefaultBuildWait}}) {
    setenv("DEVDL_CACHE_WAIT", text, 1);
    EXPECT_EQ(DiskCache::buildWaitFromEnvironment(), wait) << text;
  }
}

}  // namespace
}  // namespace devdl::cache
