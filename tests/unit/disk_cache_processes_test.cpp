// The disk cache across processes: writers killed mid-write or running side by side leave nothing
// torn behind, and the build lock has processes that miss one key build it once.
#include "unit/disk_cache_fixture.h"
#include "test_support.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace devdl::store {
namespace {

using namespace fixture;
using test::readFile;
using test::scratchDir;
using test::writeFile;

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

}  // namespace
}  // namespace devdl::store
