// Parts of the disk cache on their own, without a directory: the names that say which files are
// the cache's (store/cache_files.h), the trust of entry files and of the directory
// (store/cache_directory.h), and the order of eviction (store/eviction.h). The cache as a whole
// is tested in disk_cache_test.cpp.
#include "store/cache_directory.h"
#include "store/cache_files.h"
#include "store/eviction.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace devdl::store {
namespace {

Key keyOf(std::string_view what) { return KeyBuilder().add(what).finish(); }

TEST(DiskCacheNames, AnEntrysNameIsItsKeyInHexThenTheSuffix) {
  const Key key{0x0123456789abcdef, 0xfedcba9876543210};
  EXPECT_EQ(entryName(key), "fedcba98765432100123456789abcdef.devdl-cache");
  for (const Key &k : {key, keyOf("one"), keyOf("two"), Key{}}) {
    const std::optional<Key> back = keyFromName(entryName(k));
    ASSERT_TRUE(back) << entryName(k);
    EXPECT_EQ(*back, k);
  }
}

TEST(DiskCacheNames, OnlyFilesNamedAsTheCachesAreTheCaches) {
  const std::string hex = keyOf("k").hex();
  // Entries: 32 lowercase hex digits and the suffix, nothing more or less.
  for (const std::string &name : {hex.substr(1) + ".devdl-cache", hex + "0.devdl-cache", hex + ".devdl-cache~",
                                  hex + ".devdl-cach", "ABCDEF" + hex.substr(6) + ".devdl-cache",
                                  "g" + hex.substr(1) + ".devdl-cache", std::string(".devdl-cache"), hex})
    EXPECT_FALSE(keyFromName(name)) << name;
  // Lock files: ".lock-" and a key, as lockName makes them.
  EXPECT_EQ(lockName(keyOf("k")), ".lock-" + hex);
  EXPECT_TRUE(isLockName(lockName(keyOf("k"))));
  for (const std::string &name : {std::string(".lock-notes"), ".lock-" + hex + "x", ".lock-" + hex.substr(1),
                                  "lock-" + hex, hex + ".devdl-cache"})
    EXPECT_FALSE(isLockName(name)) << name;
  // A writer's temporary file: ".tmp-<key>-<pid>-<n>"; the user's own ".tmp-notes" is not one.
  EXPECT_TRUE(isTemporaryName(".tmp-" + hex + "-99-0"));
  for (const std::string &name : {std::string(".tmp-notes"), std::string(".tmp-0123-99-0"), ".tmp-" + hex, ".tmp-" + hex + "-",
                                  ".tmp-" + hex + "x99-0", "tmp-" + hex + "-99-0", hex + ".devdl-cache"})
    EXPECT_FALSE(isTemporaryName(name)) << name;
}

struct stat statOf(mode_t mode, uid_t user) {
  struct stat st{};
  st.st_mode = mode;
  st.st_uid = user;
  return st;
}

// Another user's files cannot be made without privileges: the checks see them here.
TEST(DiskCacheTrust, AnEntryFileMustBeAPlainFileOnlyThisUserCanWrite) {
  const uid_t me = 1000, other = 1234;
  EXPECT_EQ(untrustedEntry(statOf(S_IFREG | 0600, me), me), "");
  EXPECT_EQ(untrustedEntry(statOf(S_IFREG | 0644, me), me), "") << "others may read it";
  EXPECT_EQ(untrustedEntry(statOf(S_IFREG | 0600, other), me), "owned by user 1234, not by this user");
  EXPECT_EQ(untrustedEntry(statOf(S_IFREG | 0620, me), me), "writable by others");
  EXPECT_EQ(untrustedEntry(statOf(S_IFREG | 0602, me), me), "writable by others");
  EXPECT_EQ(untrustedEntry(statOf(S_IFIFO | 0600, me), me), "not a regular file");
  EXPECT_EQ(untrustedEntry(statOf(S_IFLNK | 0777, me), me), "not a regular file");
}

TEST(DiskCacheTrust, TheDirectoryMustBeThisUsersAndWritableByNoOneElse) {
  const uid_t me = 1000, other = 0;
  EXPECT_EQ(untrustedDirectory(statOf(S_IFDIR | 0700, me), me), "");
  EXPECT_EQ(untrustedDirectory(statOf(S_IFDIR | 0755, me), me), "") << "an existing directory's mode is the user's choice";
  EXPECT_EQ(untrustedDirectory(statOf(S_IFDIR | 0700, other), me), "belongs to user 0, not to this user");
  EXPECT_EQ(untrustedDirectory(statOf(S_IFDIR | 0770, me), me), "is writable by others");
  EXPECT_EQ(untrustedDirectory(statOf(S_IFDIR | 01777, me), me), "is writable by others") << "sticky, as /tmp is";
}

SweptEntry used(std::string name, uint64_t size, time_t seconds, long nanoseconds = 0) {
  return {std::move(name), size, {seconds, nanoseconds}};
}

// Evicts through `evict`, recording the names in the order they went.
uint64_t evict(std::vector<SweptEntry> entries, uint64_t total, uint64_t bound, std::vector<std::string> &gone,
               const std::string &undeletable = "") {
  return evictLeastRecentlyUsed(std::move(entries), total, bound, [&](const SweptEntry &entry) {
    if (entry.name == undeletable) return false;
    gone.push_back(entry.name);
    return true;
  });
}

TEST(DiskCacheEviction, TheLeastRecentlyUsedGoFirstUntilTheBoundHolds) {
  std::vector<std::string> gone;
  // In no order; "b" and "c" used in the same second, "c" a nanosecond before "b".
  const std::vector<SweptEntry> entries = {used("d", 100, 4000), used("b", 100, 2000, 500), used("a", 100, 1000),
                                           used("c", 100, 2000, 499), used("e", 100, 5000)};
  EXPECT_EQ(evict(entries, 500, 250, gone), 200u);
  EXPECT_EQ(gone, (std::vector<std::string>{"a", "c", "b"}));
  // Exactly at the bound is within it.
  gone.clear();
  EXPECT_EQ(evict(entries, 500, 300, gone), 300u);
  EXPECT_EQ(gone, (std::vector<std::string>{"a", "c"}));
}

TEST(DiskCacheEviction, NothingGoesWithinTheBound) {
  std::vector<std::string> gone;
  EXPECT_EQ(evict({used("a", 100, 1000), used("b", 100, 2000)}, 200, 200, gone), 200u);
  EXPECT_TRUE(gone.empty());
  EXPECT_EQ(evict({}, 0, 0, gone), 0u);
  EXPECT_TRUE(gone.empty());
}

TEST(DiskCacheEviction, AnEntryThatCannotBeDeletedIsNotCountedAndTheNextGoes) {
  std::vector<std::string> gone;
  const std::vector<SweptEntry> entries = {used("a", 100, 1000), used("b", 50, 2000), used("c", 100, 3000),
                                           used("d", 100, 4000)};
  EXPECT_EQ(evict(entries, 350, 250, gone, "a"), 200u);
  EXPECT_EQ(gone, (std::vector<std::string>{"b", "c"}));
  // None can be: the total stays over the bound.
  gone.clear();
  EXPECT_EQ(evictLeastRecentlyUsed(entries, 350, 100, [](const SweptEntry &) { return false; }), 350u);
}

}  // namespace
}  // namespace devdl::store
