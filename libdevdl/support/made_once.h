// A value made on first use by whichever threads ask first, none waiting for another. Making it
// may call the host loader (dlopen of a driver), whose lock a waiting thread could hold: a host
// library's constructor calling devdl. A function-local static would make that thread wait for
// the maker, and the maker for the host loader's lock: a deadlock.
#pragma once

#include <atomic>
#include <memory>

namespace devdl {

template <typename T>
class MadeOnce {
 public:
  /// The value: the first one made and published is kept for the life of the process; one made
  /// at the same time by another thread is dropped.
  template <typename Make>
  const T &get(Make make) {
    if (const T *value = value_.load(std::memory_order_acquire)) return *value;
    auto made = std::make_unique<const T>(make());
    const T *expected = nullptr;
    if (value_.compare_exchange_strong(expected, made.get(), std::memory_order_acq_rel)) return *made.release();
    return *expected;
  }

 private:
  std::atomic<const T *> value_{nullptr};
};

}  // namespace devdl
