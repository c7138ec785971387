// The loader's one mutex, and the generation every change moves. How the loader locks, and why
// it lets go for work outside: docs/architecture.md, "Threads".
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace devdl {

/// The mutex that guards the loader's own data, with what was released under it: programs,
/// references on host objects, destroyed once it is let go (a program's destruction calls the
/// backend, a reference's the host loader).
class LoaderMutex {
 public:
  /// Destroyed once the mutex is let go.
  void destroyLater(std::shared_ptr<const void> object) { released_.push_back(std::move(object)); }
  void destroyLater(std::optional<std::vector<std::shared_ptr<const void>>> &references) {
    if (references)
      for (auto &reference : *references) released_.push_back(std::move(reference));
  }
  std::vector<std::shared_ptr<const void>> &released() { return released_; }

 private:
  friend class LoaderLock;
  std::mutex mutex_;
  std::vector<std::shared_ptr<const void>> released_;
};

/// The loader's mutex held; let go for work outside (LoaderLock::letGo) and taken again. Each
/// time it is let go, what was released under it is destroyed.
class LoaderLock {
 public:
  explicit LoaderLock(LoaderMutex &mutex) : mutex_(mutex), lock_(mutex.mutex_) {}
  ~LoaderLock() { letGo(); }
  LoaderLock(const LoaderLock &) = delete;
  LoaderLock &operator=(const LoaderLock &) = delete;
  /// Lets the mutex go and destroys what was released under it.
  void letGo() {
    if (!lock_.owns_lock()) return;
    std::vector<std::shared_ptr<const void>> released = std::move(mutex_.released_);
    mutex_.released_.clear();
    lock_.unlock();
    released.clear();  // programs released by the backend, references dropped by the host loader
  }
  void takeAgain() { lock_.lock(); }
  std::unique_lock<std::mutex> &held() { return lock_; }
  LoaderMutex &mutex() { return mutex_; }

 private:
  LoaderMutex &mutex_;
  std::unique_lock<std::mutex> lock_;
};

/// Moved by every change that could alter a lookup's answer. One for every loader of the process:
/// one made where another was destroyed (the tests') may have the same address and handles at
/// the same addresses, never the same generation.
class Generation {
 public:
  static uint64_t now() { return value_.load(std::memory_order_acquire); }
  static void move() { value_.fetch_add(1, std::memory_order_release); }

 private:
  static inline std::atomic<uint64_t> value_{1};
};

/// What a step that let the loader's mutex go came to: its result, or that what it found changed
/// meanwhile, so that its caller looks again (a file it needs closed, a host object unloaded,
/// another thread's build to look at).
template <typename T>
class Outcome {
 public:
  Outcome(T value) : value_(std::move(value)) {}
  static Outcome lookAgain() { return Outcome(); }
  bool settled() const { return value_.has_value(); }
  T &operator*() { return *value_; }

 private:
  Outcome() = default;
  std::optional<T> value_;
};

}  // namespace devdl
