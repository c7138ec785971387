// The host's uniquely identifiable objects (seed 002): the address of a host object (a SYCL
// device_global, a specialization_id) and the unique id the device images know it by. Code the
// compiler generates registers them before main and from host libraries' constructors, so a
// registration is an append under a lock and nothing more; the log is sorted into the table at the
// next lookup (or once it outgrows the table), which host object each address lies in is settled
// then, and the registrations of a library the host unloaded leave with it.
#pragma once

#include <llvm/Support/Allocator.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace devdl::host {

class ObjectRegistry {
 public:
  static ObjectRegistry &instance();

  /// Registers `address` as the object `uniqueId` of `kind` (a later registration of the same
  /// address replaces it). Safe in host constructors and during dlopen.
  void add(const void *address, const char *uniqueId, const char *kind);

  struct Entry {
    std::string uniqueId, kind;
  };
  /// What `address` was registered as, unless the host object it lies in was unloaded since.
  std::optional<Entry> find(const void *address);

  /// How many registrations there are, those of unloaded host objects gone.
  size_t size();

 private:
  static constexpr uint32_t kUnsettled = UINT32_MAX, kNoObject = UINT32_MAX - 1;
  struct Registration {
    const void *address;
    const char *uniqueId;  // a copy, in strings_
    const char *kind;      // one of kinds_
    uint32_t owner;               // an index into objects_, kNoObject (not in one: heap), or kUnsettled
  };
  // A host object the addresses lie in: its base and name identify it while it is loaded.
  struct HostObject {
    uintptr_t base;
    std::string name;
    std::vector<std::pair<uintptr_t, uintptr_t>> segments;  // [begin, end) of its PT_LOAD segments
  };

  /// Sorts the log into the table (the last registration of an address wins); once replaced
  /// registrations' strings are most of the arena, copies those still used into a new one.
  void compact();
  /// compact(), then assigns the new registrations their host objects and drops those of objects
  /// unloaded since.
  void settle();

  std::mutex mutex_;
  std::vector<Registration> table_;  // sorted by address, one per address
  std::vector<Registration> log_;    // registrations since, in order
  std::vector<Registration> spare_;  // the table before the last merge: memory for the next
  std::unique_ptr<llvm::BumpPtrAllocator> strings_ = std::make_unique<llvm::BumpPtrAllocator>();
  size_t replaced_ = 0;  // registrations replaced since strings_ was made: their strings are waste
  std::deque<std::string> kinds_;  // every kind registered ("device_global", ...), kept for good
  const char *lastKind_ = nullptr;
  uint64_t settledGeneration_ = 0;
  std::vector<HostObject> objects_;  // as of settledGeneration_
};

}  // namespace devdl::host
