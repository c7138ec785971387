#include "backend/thread_end.h"

#include <llvm/ADT/STLExtras.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <vector>

namespace devdl::backend {

namespace {

std::atomic<uint64_t> lastThread{0};

struct ThisThread {
  uint64_t number = lastThread.fetch_add(1, std::memory_order_relaxed) + 1;
  bool main = syscall(SYS_gettid) == getpid();
  std::vector<std::weak_ptr<ThreadEndListener>> listeners;

  ~ThisThread() {
    if (main) return;
    for (std::weak_ptr<ThreadEndListener> &listener : listeners)
      if (std::shared_ptr<ThreadEndListener> alive = listener.lock()) alive->threadEnded(number);
  }
};
thread_local ThisThread thisThread;

}  // namespace

uint64_t currentThread() { return thisThread.number; }

void onThreadEnd(std::weak_ptr<ThreadEndListener> listener) {
  if (thisThread.main) return;
  // Those of tables gone meanwhile leave, so that a long-lived thread's list stays short.
  llvm::erase_if(thisThread.listeners, [](const std::weak_ptr<ThreadEndListener> &l) { return l.expired(); });
  thisThread.listeners.push_back(std::move(listener));
}

}  // namespace devdl::backend
