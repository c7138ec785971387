// The disk cache on its own: keys, entries that round-trip, damage caught and deleted, and what
// the environment sets. Trust, the bound and other processes are tested in the files beside it.
#include "unit/disk_cache_fixture.h"
#include "test_support.h"

#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace devdl::store {
namespace {

using namespace fixture;
using test::readFile;
using test::scratchDir;
using test::writeFile;

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
}  // namespace devdl::store
