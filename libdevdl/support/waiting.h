// Waiting for work another thread does for this one: a backend's device being opened, a program
// being built. The worker may need the host loader's lock (glibc's: a driver loads libraries),
// and the waiter may hold it (a host library's constructor calling devdl): waiting for ever would
// then deadlock, and not waiting would do the work twice (two threads starting PoCL at once
// crashed it). So a waiter waits as long as the work takes once it is shown not to hold that
// lock: another thread takes the lock while it waits. Only where that is not shown within a
// bound (the lock held by someone that long) does it stop waiting, and do the work itself.
//
// Across processes no lock of the waiter's is needed by the worker: a process waits for another's
// build while that one lives (store/disk_cache.h).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

namespace devdl {

/// Shows that the thread that makes it does not hold the host loader's lock: a thread of its own
/// takes that lock and lets it go. Once it has, the maker did not hold the lock then, nor since
/// while it has only waited.
class HostLockProbe {
 public:
  HostLockProbe();
  /// Whether the probe has taken the lock (never where its thread could not be started).
  bool tookLock() const { return took_ && took_->load(std::memory_order_acquire); }

 private:
  std::shared_ptr<std::atomic<bool>> took_;  // shared with the probe's thread, which may outlive this
};

/// Waits on `changed` until `done()`, with `lock` held when it checks: as long as it takes once a
/// HostLockProbe shows this thread does not hold the host loader's lock, else at most `bound`.
/// Returns done(). The lock is let go while the probe's thread starts.
template <typename Done>
bool waitForOther(std::unique_lock<std::mutex> &lock, std::condition_variable &changed, std::chrono::milliseconds bound,
                  Done done) {
  if (done()) return true;
  lock.unlock();
  HostLockProbe probe;
  lock.lock();
  if (changed.wait_for(lock, bound, done)) return true;
  if (!probe.tookLock()) return false;
  changed.wait(lock, done);
  return true;
}

}  // namespace devdl
