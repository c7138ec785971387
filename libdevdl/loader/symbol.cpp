// device_dlsym: the lookups a thread made before answered without the mutex (Remembered), the
// others located under it (loader/lookups.h).
#include "host/loaded_bundles.h"
#include "loader/loader.h"
#include "support/error.h"

#include <llvm/ADT/STLExtras.h>

#include <algorithm>
#include <functional>

namespace devdl {

namespace {

// The answers device_dlsym gave this thread, by handle and name: given again without the loader's
// lock while the generation they were found in is the loader's (and, for an image of a host
// object found through the global scope, while that object is loaded where it was). All of them
// go when the generation moves, and past kMostRemembered, so that a thread's memory stays
// bounded: a miss only costs the mutex. Open addressing over a power of two, at most half full: a
// lookup is a hash and, mostly, one comparison.
class Remembered {
 public:
  struct Answer {
    void *address;
    const void *hostAddress;  // in the host object whose image defines it; null for a handle's image
    host::LoadMark hostLoad;
  };
  static constexpr size_t kMostRemembered = 8192;

  const Answer *find(const Loader *loader, uint64_t now, const void *handle, std::string_view name) {
    if (loader != loader_ || now != generation_) {
      forget();
      loader_ = loader;
      generation_ = now;
      return nullptr;
    }
    if (count_ == 0) return nullptr;
    const size_t mask = slots_.size() - 1;
    for (size_t i = hashOf(handle, name) & mask;; i = (i + 1) & mask) {
      const Slot &slot = slots_[i];
      if (!slot.used) return nullptr;
      if (slot.handle == handle && slot.name == name) return &slot.answer;
    }
  }
  /// Remembers an answer found in generation `now` (ignored if it is not find's).
  void add(const Loader *loader, uint64_t now, const void *handle, std::string_view name, Answer answer) {
    if (loader != loader_ || now != generation_) return;
    if (count_ >= kMostRemembered) forget();
    if (2 * (count_ + 1) > slots_.size()) grow();
    place(handle, name, answer);
  }

 private:
  struct Slot {
    bool used = false;
    const void *handle = nullptr;
    std::string name;
    Answer answer{};
  };
  static size_t hashOf(const void *handle, std::string_view name) {
    return std::hash<std::string_view>{}(name) ^ (reinterpret_cast<uintptr_t>(handle) >> 4);
  }
  void place(const void *handle, std::string_view name, const Answer &answer) {
    const size_t mask = slots_.size() - 1;
    size_t i = hashOf(handle, name) & mask;
    while (slots_[i].used && !(slots_[i].handle == handle && slots_[i].name == name)) i = (i + 1) & mask;
    Slot &slot = slots_[i];
    if (!slot.used) {
      slot.used = true;
      slot.handle = handle;
      slot.name.assign(name);
      ++count_;
    }
    slot.answer = answer;
  }
  void grow() {
    std::vector<Slot> old = std::exchange(slots_, std::vector<Slot>(std::max<size_t>(64, 2 * slots_.size())));
    count_ = 0;
    for (Slot &slot : old)
      if (slot.used) place(slot.handle, slot.name, slot.answer);
  }
  void forget() {
    if (count_ == 0) return;
    for (Slot &slot : slots_) slot.used = false;
    count_ = 0;
  }

  const Loader *loader_ = nullptr;
  uint64_t generation_ = 0;
  std::vector<Slot> slots_;
  size_t count_ = 0;
};
thread_local Remembered remembered;
}  // namespace

llvm::Expected<void *> Loader::symbol(void *handlePtr, std::string_view name) {
  // What this thread found before, while nothing changed: no lock at all.
  const uint64_t now = Generation::now();
  if (const Remembered::Answer *answer = remembered.find(this, now, handlePtr, name))
    if (!answer->hostAddress || host::loadMarkOf(answer->hostAddress) == answer->hostLoad) return answer->address;

  LoaderLock lock(parts_.mutex);
  lookupsUnderLock_.fetch_add(1, std::memory_order_relaxed);
  auto located = parts_.lookups.locate(lock, handlePtr, name);
  if (!located) return located.takeError();
  // The native object is made by the backend with the mutex let go.
  const Definition &definition = located->definition;
  auto address = [&]() -> llvm::Expected<void *> {
    if (definition.kind == SymbolKind::Kernel) return located->program->kernel(name);
    if (definition.kind != SymbolKind::Variable) return located->program->function(name);
    auto extent = located->program->variable(name);
    if (!extent) return extent.takeError();
    return extent->address;
  }();
  if (!address) return inImage(address.takeError(), located->label);
  // A host object's image answers while that load of the object is there: objects loaded later
  // come after it in the global scope, and one unloaded since is rescanned.
  std::optional<host::LoadMark> hostLoad;
  if (located->hostAddress && !(hostLoad = host::loadMarkOf(located->hostAddress))) return *address;
  remembered.add(this, now, handlePtr, name, {*address, located->hostAddress, hostLoad.value_or(host::LoadMark{})});
  return *address;
}

}  // namespace devdl
