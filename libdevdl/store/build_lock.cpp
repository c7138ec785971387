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
    if (cache_.holdsDirectory() && stillNamed(fd_, cache_.directoryFd_, name.c_str()))
      unlinkat(cache_.directoryFd_, name.c_str(), 0);
    close(fd_);
  }

 private:
  DiskCache &cache_;
  Key key_;
  int fd_;
};

BuildTurn DiskCache::awaitTurn(const Key &key) {
  using Clock = std::chrono::steady_clock;
  const std::string name = lockName(key);
  const auto start = Clock::now();
  auto look = kFirstLook;
  std::string holder;  // the process building, as its lock file says
  Fd file(-1);
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (!prepare() || std::find(lockedHere_.begin(), lockedHere_.end(), key) != lockedHere_.end()) return {};
      if (file.fd < 0) file.fd = openat(directoryFd_, name.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
      if (file.fd < 0) {
        report("cannot lock " + pathOf(name) + ": " + errnoText() + "; building without it");
        return {};
      }
      if (flock(file.fd, LOCK_EX | LOCK_NB) == 0) {
        // The last holder deletes the name before it lets go: locked, this file may be one no
        // other process will find any more.
        if (!stillNamed(file.fd, directoryFd_, name.c_str())) {
          close(std::exchange(file.fd, -1));
          continue;
        }
        // Who builds, for what waiters say; nothing else reads it.
        char pid[32];
        writeOver(file.fd, pid, std::snprintf(pid, sizeof pid, "%20ld\n", static_cast<long>(getpid())));
        lockedHere_.push_back(key);
        BuildTurn turn;
        turn.lock = std::make_unique<FileLock>(*this, key, std::exchange(file.fd, -1));
        // Another process may have stored the entry since the miss, having waited for it or
        // not. The miss was counted: this read counts what it came to instead.
        turn.entry = read(key, stats_, "the program is built again");
        --stats_.misses;
        if (!holder.empty()) {
          const uint64_t waited = static_cast<uint64_t>(std::chrono::nanoseconds(Clock::now() - start).count());
          ++stats_.waits;
          stats_.waitNanoseconds += waited;
          report(llvm::formatv("waited {0:f1} ms for {1}'s build of {2}: ", waited / 1e6, holder, key.hex()).str() +
                 (turn.entry ? "its entry is loaded" : "it stored none, so it is built here"));
        }
        return turn;
      }
      if (errno != EWOULDBLOCK) {
        report("cannot lock " + pathOf(name) + ": " + errnoText() + "; building without it");
        return {};
      }
      if (holder.empty()) {
        char text[24] = {};
        const ssize_t n = pread(file.fd, text, sizeof text - 1, 0);
        const long pid = n > 0 ? std::strtol(text, nullptr, 10) : 0;
        holder = pid > 0 ? "process " + std::to_string(pid) : "another process";
        report(holder + " builds " + key.hex() + ": waiting for its entry");
      }
    }
    const auto waited = Clock::now() - start;
    // In milliseconds: the bound may be their largest number (no bound), nanoseconds' overflow.
    const auto left = buildWait_ - std::chrono::duration_cast<std::chrono::milliseconds>(waited);
    if (left <= std::chrono::milliseconds::zero()) {
      std::lock_guard lock(mutex_);
      ++stats_.waits;
      stats_.waitNanoseconds += static_cast<uint64_t>(std::chrono::nanoseconds(waited).count());
      report("waited " + std::to_string(buildWait_.count()) + " ms (DEVDL_CACHE_WAIT) for " + holder + "'s build of " +
             key.hex() + ": built here too");
      return {};
    }
    std::this_thread::sleep_for(left < look ? left + std::chrono::milliseconds(1) : look);
    look = std::min(look * 2, kLongestLook);
  }
}

}  // namespace devdl::store
