// A program's kernels by name, as every backend keeps them: each made on first request, outside
// the lock (making one calls the driver), and kept; one object for one name, whichever thread
// asks first.
#pragma once

#include <llvm/Support/Error.h>

#include <map>
#include <mutex>
#include <string>
#include <string_view>

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

}  // namespace devdl::backend
