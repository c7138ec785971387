// What the disk cache trusts: no file or directory others could have written, and only the directory
// it checked (not where its path leads later); one it cannot write, or a full disk, turns it off.
#include "unit/disk_cache_fixture.h"
#include "test_support.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <string>
#include <utility>
#include <vector>

namespace devdl::store {
namespace {

using namespace fixture;
using test::scratchDir;

mode_t modeOf(const std::string &path) {
  struct stat st{};
  stat(path.c_str(), &st);
  return st.st_mode & 07777;
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

TEST(DiskCache, DirectoriesAndEntriesArePrivateToTheUser) {
  const std::string base = scratchDir();
  DiskCache cache(base + "/a/b/devdl", kUnbounded);
  cache.store(keyOf("k"), "", "binary", 1);
  for (const char *dir : {"/a", "/a/b", "/a/b/devdl"}) EXPECT_EQ(modeOf(base + dir), 0700u) << dir;
  EXPECT_EQ(modeOf(entryPath(base + "/a/b/devdl", keyOf("k"))), 0600u);
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

}  // namespace
}  // namespace devdl::store
