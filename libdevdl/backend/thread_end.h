// Threads as the per-thread kernel tables know them: a number for each thread, never used again,
// and the tables a thread made kernels in told when it ends, so that they release its kernels.
#pragma once

#include <cstdint>
#include <memory>

namespace devdl::backend {

class ThreadEndListener {
 public:
  /// Thread `thread` (currentThread()'s number there) has ended.
  virtual void threadEnded(uint64_t thread) = 0;

 protected:
  ~ThreadEndListener() = default;
};

/// The calling thread's number: from 1, never given to another thread.
uint64_t currentThread();

/// Tells `listener`, if it still exists then, when the calling thread ends. The process's main
/// thread tells no one: it ends with the process, whose drivers may be ending too.
void onThreadEnd(std::weak_ptr<ThreadEndListener> listener);

}  // namespace devdl::backend
