// One build per key across processes: after a miss, a process takes the key's lock file
// (.lock-<key>, flock) in the directory, or waits while another process holds it and then loads
// the entry that process stored. docs/cache-format.md ("One build per key").
#include "store/cache_files.h"
#include "store/disk_cache.h"

#include <llvm/Support/FormatVariadic.h>

#include <fcntl.h>
#include <sys/file.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace devdl::store {

namespace {

using Clock = std::chrono::steady_clock;

// A waiter looks again after this, doubling up to the longest: builds take milliseconds to
// seconds, and a look is a system call.
constexpr std::chrono::milliseconds kFirstLook{1}, kLongestLook{20};

}  // namespace

// A key's lock file, held open and locked while this process builds the key's program. Let go
// after the entry is stored: its name is deleted first, so that a waiter that locks the old file
// then sees it unnamed and takes the name anew (and finds the entry).
class DiskCache::FileLock final : public BuildLock {
 public:
  FileLock(DiskCache &cache, const Key &key, int fd) : cache_(cache), key_(key), fd_(fd) {}
  ~FileLock() override {
    std::lock_guard lock(cache_.mutex_);
    std::erase(cache_.lockedHere_, key_);
    const std::string name = lockName(key_);
    if (cache_.directory_.held() && stillNamed(fd_, cache_.directory_.fd(), name.c_str()))
      unlinkat(cache_.directory_.fd(), name.c_str(), 0);
    close(fd_);
  }

 private:
  DiskCache &cache_;
  Key key_;
  int fd_;
};

// One awaitTurn(): the key's lock file, tried until this process takes it, or the wait is over.
class DiskCache::TurnWait {
 public:
  TurnWait(DiskCache &cache, const Key &key) : cache_(cache), key_(key), name_(lockName(key)), start_(Clock::now()) {}

  BuildTurn await() {
    for (;;) {
      if (std::optional<BuildTurn> turn = tryTake()) return std::move(*turn);
      if (!pause()) return {};
    }
  }

 private:
  /// One look at the lock, with the cache's mutex held: the turn, or none where this process
  /// builds without the lock; nullopt while another process holds it.
  std::optional<BuildTurn> tryTake() {
    for (;;) {
      std::lock_guard lock(cache_.mutex_);
      CacheDirectory &directory = cache_.directory_;
      if (!directory.prepare() || std::ranges::find(cache_.lockedHere_, key_) != cache_.lockedHere_.end())
        return BuildTurn{};
      if (file_.fd < 0)
        file_.fd = openat(directory.fd(), name_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
      if (file_.fd < 0) return withoutLock();
      if (flock(file_.fd, LOCK_EX | LOCK_NB) == 0) {
        // The last holder deletes the name before it lets go: locked, this file may be one no
        // other process will find any more.
        if (stillNamed(file_.fd, directory.fd(), name_.c_str())) return take();
        close(std::exchange(file_.fd, -1));
        continue;
      }
      if (errno != EWOULDBLOCK) return withoutLock();
      if (holder_.empty()) noteHolder();
      return std::nullopt;
    }
  }

  BuildTurn withoutLock() {
    reportCache("cannot lock " + cache_.directory_.pathOf(name_) + ": " + errnoText() + "; building without it");
    return {};
  }

  /// The lock taken, on the file that has its name.
  BuildTurn take() {
    // Who builds, for what waiters say; nothing else reads it.
    char pid[32];
    writeOver(file_.fd, pid, std::snprintf(pid, sizeof pid, "%20ld\n", static_cast<long>(getpid())));
    cache_.lockedHere_.push_back(key_);
    BuildTurn turn;
    turn.lock = std::make_unique<FileLock>(cache_, key_, std::exchange(file_.fd, -1));
    // Another process may have stored the entry since the miss, having waited for it or
    // not. The miss was counted: this read counts what it came to instead.
    Statistics &stats = cache_.stats_;
    turn.entry = cache_.read(key_, stats, "the program is built again");
    --stats.misses;
    if (!holder_.empty()) {
      const uint64_t waited = static_cast<uint64_t>(std::chrono::nanoseconds(Clock::now() - start_).count());
      ++stats.waits;
      stats.waitNanoseconds += waited;
      reportCache(llvm::formatv("waited {0:f1} ms for {1}'s build of {2}: ", waited / 1e6, holder_, key_.hex()).str() +
                    (turn.entry ? "its entry is loaded" : "it stored none, so it is built here"));
    }
    return turn;
  }

  /// Says which process holds the lock, as its lock file says, and that this one waits.
  void noteHolder() {
    char text[24] = {};
    const ssize_t n = pread(file_.fd, text, sizeof text - 1, 0);
    const long pid = n > 0 ? std::strtol(text, nullptr, 10) : 0;
    holder_ = pid > 0 ? "process " + std::to_string(pid) : "another process";
    reportCache(holder_ + " builds " + key_.hex() + ": waiting for its entry");
  }

  /// Sleeps until the next look; false (having counted and said so) once the build wait is over.
  bool pause() {
    const auto waited = Clock::now() - start_;
    // In milliseconds: the bound may be their largest number (no bound), nanoseconds' overflow.
    const auto left = cache_.buildWait_ - std::chrono::duration_cast<std::chrono::milliseconds>(waited);
    if (left <= std::chrono::milliseconds::zero()) {
      std::lock_guard lock(cache_.mutex_);
      ++cache_.stats_.waits;
      cache_.stats_.waitNanoseconds += static_cast<uint64_t>(std::chrono::nanoseconds(waited).count());
      reportCache("waited " + std::to_string(cache_.buildWait_.count()) + " ms (DEVDL_CACHE_WAIT) for " + holder_ +
                    "'s build of " + key_.hex() + ": built here too");
      return false;
    }
    std::this_thread::sleep_for(left < look_ ? left + std::chrono::milliseconds(1) : look_);
    look_ = std::min(look_ * 2, kLongestLook);
    return true;
  }

  DiskCache &cache_;
  const Key key_;
  const std::string name_;
  const Clock::time_point start_;
  std::chrono::milliseconds look_ = kFirstLook;
  std::string holder_;  // the process building, as its lock file says
  Fd file_{-1};
};

BuildTurn DiskCache::awaitTurn(const Key &key) { return TurnWait(*this, key).await(); }

}  // namespace devdl::store
