// A program's kernels by name, as the backends keep them, each made on first request outside the
// table's lock (making one calls the driver) and kept: one object for one name, whichever thread
// asks first (KernelTable: CUDA's CUfunction takes no arguments); or one for each thread that
// asks (ThreadKernelTable: OpenCL's and Level Zero's kernel objects hold their arguments, so that
// threads sharing one would race from setting them to the launch).
#pragma once

#include "backend/thread_end.h"

#include <llvm/Support/Error.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace devdl::backend {

template <typename Kernel>
class KernelTable {
 public:
  /// The kernel `name`: the one kept, else `make()`'s (an llvm::Expected<Kernel>), kept. A kernel
  /// another thread kept meanwhile wins, and `release` is given the one made here.
  template <typename Make, typename Release>
  llvm::Expected<void *> get(std::string_view name, Make make, Release release) {
    {
      std::lock_guard lock(mutex_);
      if (auto it = kernels_.find(name); it != kernels_.end()) return it->second;
    }
    llvm::Expected<Kernel> made = make();
    if (!made) return made.takeError();
    std::unique_lock lock(mutex_);
    auto [it, kept] = kernels_.emplace(std::string(name), *made);
    lock.unlock();
    if (!kept) release(*made);
    return it->second;
  }

  /// Calls `f` with every kernel kept (for the program's destructor: no other call at once).
  template <typename F>
  void forEach(F f) const {
    for (const auto &[name, kernel] : kernels_) f(kernel);
  }

 private:
  std::mutex mutex_;  // of kernels_; never held across a driver call
  std::map<std::string, Kernel, std::less<>> kernels_;
};

template <typename Kernel>
class ThreadKernelTable {
 public:
  /// `release` lets a kernel go: with the table, or when the thread that asked for it ends.
  explicit ThreadKernelTable(std::function<void(Kernel)> release)
      : state_(std::make_shared<State>(std::move(release))) {}
  ~ThreadKernelTable() { releaseAll(); }
  ThreadKernelTable(const ThreadKernelTable &) = delete;
  ThreadKernelTable &operator=(const ThreadKernelTable &) = delete;

  /// Releases every thread's kernels (a program's destructor, before what they hold).
  void releaseAll() { state_->releaseAll(); }

  /// The calling thread's kernel `name`: the one it was given before, else `make()`'s (an
  /// llvm::Expected<Kernel>), kept for it until it ends.
  template <typename Make>
  llvm::Expected<void *> get(std::string_view name, Make make) {
    const uint64_t thread = currentThread();
    {
      std::lock_guard lock(state_->mutex);
      if (auto it = state_->kernels.find(std::pair(thread, name)); it != state_->kernels.end()) return it->second;
    }
    llvm::Expected<Kernel> made = make();  // only this thread makes its own: no other can race it
    if (!made) return made.takeError();
    std::unique_lock lock(state_->mutex);
    // The thread's first kernel here: the table hears of its end.
    auto next = state_->kernels.lower_bound(std::pair(thread, std::string_view()));
    const bool first = next == state_->kernels.end() || next->first.first != thread;
    state_->kernels.emplace_hint(next, std::pair(thread, std::string(name)), *made);
    lock.unlock();
    if (first) onThreadEnd(state_);
    return *made;
  }

 private:
  struct Less {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A &a, const B &b) const {
      return a.first != b.first ? a.first < b.first : std::string_view(a.second) < std::string_view(b.second);
    }
  };
  // Shared with the threads' end: a thread that ends after the table finds it empty.
  struct State final : ThreadEndListener {
    explicit State(std::function<void(Kernel)> release) : release(std::move(release)) {}
    void threadEnded(uint64_t thread) override {
      std::vector<Kernel> ended;
      {
        std::lock_guard lock(mutex);
        auto it = kernels.lower_bound(std::pair(thread, std::string_view()));
        while (it != kernels.end() && it->first.first == thread) {
          ended.push_back(it->second);
          it = kernels.erase(it);
        }
      }
      for (Kernel kernel : ended) release(kernel);  // the driver's call, outside the lock
    }
    void releaseAll() {
      std::map<std::pair<uint64_t, std::string>, Kernel, Less> all;
      {
        std::lock_guard lock(mutex);
        all.swap(kernels);
      }
      for (const auto &[key, kernel] : all) release(kernel);
    }

    const std::function<void(Kernel)> release;
    std::mutex mutex;  // of kernels; never held across a driver call
    std::map<std::pair<uint64_t, std::string>, Kernel, Less> kernels;  // by thread, then name
  };
  std::shared_ptr<State> state_;
};

}  // namespace devdl::backend
