// Linked programs in memory, found by what they are made of, and the get-or-build policy behind
// them: a program whose images include all of a plan's serves that plan (the seed's nested key);
// otherwise it is built once, by one thread of the process (a turn per device and key) and one
// process of the machine (the binary store's build lock): the binary store's program for the
// plan, else one linked by the device and stored. The loader drives the phases (loader/programs.h:
// plan, use, build); how it locks: docs/architecture.md, "Threads".
#pragma once

#include "backend/backend.h"
#include "store/binary_store.h"
#include "resolve/link_plan.h"

#include <llvm/Support/Error.h>

#include <llvm/ADT/STLFunctionalExtras.h>

#include <algorithm>
#include <chrono>
#include <compare>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace devdl::cache {

/// XXH3-128 of an image's bytes (and of the specialization constants set on it): programs are
/// keyed by what they are made of.
struct ContentHash {
  uint64_t low = 0, high = 0;
  auto operator<=>(const ContentHash &) const = default;

  /// The hash of an image of bytes hashing to `bytes` with the specialization constants `values`
  /// set: another program.
  static ContentHash specialized(ContentHash bytes, const backend::SpecConstants &values);
  /// This image's hash with the names the plan interposes made local in it: it is linked as
  /// another image would be.
  ContentHash withInterposed(std::span<const std::string_view> interposed) const;
};

/// What a program is keyed by: the hashes of its images, sorted (the seed's key, with the images
/// sorted by content rather than by the names they define); the loaded images whose variables it
/// reaches, since each has one instance on a device; and the variables it reaches in another
/// program (which change its code, not what it serves).
struct ProgramKey {
  std::vector<ContentHash> hashes;
  /// The ids of its images that define variables it links (not made local), sorted: two loaded
  /// images of the same bytes each have their variables' instance, as two copies of a host
  /// library have their own data.
  std::vector<uint32_t> instances;
  /// The names of the variables it reaches through cells (image/instance_cells.h), sorted: a
  /// variable the program interposes, which an image's own code reaches, by its cell's name.
  std::vector<std::string> elsewhere;
  /// Linked for a runtime that loads it (backend::RuntimeLoad): one module, with the runtime's
  /// anchor kernel in it.
  bool forRuntime = false;

  /// The key of the program linked from `plan`, `hashOf(id)` being image `id`'s hash.
  static ProgramKey of(const LinkPlan &plan, llvm::function_ref<ContentHash(uint32_t)> hashOf);
  /// Whether a program of this key holds every image of `other`: it serves `other`'s plan too
  /// (the seed's nested key), its images defining each symbol once.
  bool includes(const ProgramKey &other) const {
    return std::includes(hashes.begin(), hashes.end(), other.hashes.begin(), other.hashes.end()) &&
           std::includes(instances.begin(), instances.end(), other.instances.begin(), other.instances.end());
  }
  /// The binary store's key of this program linked for a device of `deviceIdentity`: its code,
  /// whichever loaded images it was linked from.
  store::Key storeKey(std::string_view deviceIdentity) const;
  auto operator<=>(const ProgramKey &) const = default;
};

/// A program linked from a link plan, the images it holds, and the plans it serves. Like a host
/// library its dependents keep loaded, it lives while a plan it serves does, whatever happens to
/// the other images it holds: a plan goes when its root image is unloaded.
struct LinkedProgram {
  /// A root image's plan that this program serves, as it was linked: its images (the root
  /// first) and bindings stay what the program runs, whatever is unloaded since.
  struct Use {
    uint32_t root;
    LinkPlan plan;
    // What keeps the plan's images in memory while it is used (references on host objects).
    std::vector<std::shared_ptr<const void>> pins;
    bool operator==(const Use &other) const { return root == other.root && plan.images == other.plan.images; }
  };
  ProgramKey key;
  std::vector<uint32_t> images;  // the images it was linked from: kept while it lives
  /// By position in `images`: the names made local in that image, whose definitions there are
  /// not the program's (LinkPlan::interposed), sorted.
  std::vector<std::vector<std::string_view>> interposed;
  std::vector<Use> uses;
  backend::Device *device;
  // Shared with lookups making a kernel from it with the loader's lock let go: the last of them
  // releases it.
  std::shared_ptr<backend::Program> program;
  /// Its native binary, kept where another device of its model (the same identity()) was in use
  /// when it was built: that device loads it rather than link again (ProgramCache::sameModel).
  std::shared_ptr<const std::string> binary;
  /// The images whose variables have their one instance on the device in this program (it was
  /// the first linked with them): it lives while one of them is loaded, as a host library's data
  /// does, whatever uses it.
  std::vector<uint32_t> instances;
  /// The programs holding the instances it reaches through cells (key.elsewhere), which live
  /// while it does; and how many programs reach one of its instances.
  std::vector<LinkedProgram *> lenders;
  unsigned borrowers = 0;
  /// Variables another image interposes that it keeps a copy of, by image, where no program held
  /// their instance and the image cannot reach one elsewhere (a cubin's): the only copy while it
  /// lives.
  std::vector<std::pair<uint32_t, std::string_view>> copies;

  bool holds(uint32_t image) const { return std::find(images.begin(), images.end(), image) != images.end(); }
  /// Whether `image`'s definition of `name` is the program's: it holds the image, and the name
  /// is neither made local there nor reached in another program.
  bool defines(uint32_t image, std::string_view name) const {
    auto it = std::find(images.begin(), images.end(), image);
    if (it == images.end()) return false;
    const auto &local = interposed[static_cast<size_t>(it - images.begin())];
    return !std::binary_search(local.begin(), local.end(), name) &&
           !std::binary_search(key.elsewhere.begin(), key.elsewhere.end(), name);
  }
  /// Whether it lives: a plan uses it, it holds the instance of a loaded image's variables
  /// (`loaded`), or a program reaches one of its instances.
  bool needed(llvm::function_ref<bool(uint32_t)> loaded) const {
    return !uses.empty() || borrowers || std::any_of(instances.begin(), instances.end(), loaded);
  }
};

/// A program made by ProgramCache::build, and whether a binary store had it: the entry's source
/// ("the disk cache", "the remote store redis://…"), empty where it was linked.
struct Built {
  std::unique_ptr<backend::Program> program;
  std::string source;
  std::shared_ptr<const std::string> binary;  // where build() was asked to keep it
  bool fromStore() const { return !source.empty(); }
};

/// Where the instance of a variable a program reaches through its cell lies: what the cell is
/// set to.
struct InstanceAddress {
  std::string_view name;  // the variable's
  std::string cell;       // the cell's (image/instance_cells.h)
  void *address;
};

/// A binary another device of the same model linked in this process, that device, and where
/// the binary came from as messages say it ("the binary linked for pthread-cpu #1").
struct SameModel {
  std::shared_ptr<const std::string> binary;
  const backend::Device *device = nullptr;
  std::string source;
};

/// Its caller serializes the calls with a mutex of its own (the loader's), but for build(), which
/// reads nothing of the cache (only its arguments and the store), called with that mutex let go.
class ProgramCache {
 public:
  /// `store` is asked for on the first build (the disk cache is set up then, not before).
  /// `hostLockWait`: how long a thread that may hold the host loader's lock waits for another's
  /// build (support/waiting.h).
  ProgramCache(store::BinaryStore &(*store)(), std::chrono::milliseconds hostLockWait)
      : store_(store), hostLockWait_(hostLockWait) {}
  ProgramCache(const ProgramCache &) = delete;
  ProgramCache &operator=(const ProgramCache &) = delete;

  /// A program on `device` whose images include every image of `key`, or null.
  LinkedProgram *find(const backend::Device *device, const ProgramKey &key) const;
  /// The first program on `device`, in the order they were made, whose definition of `name` is
  /// image `id`'s (LinkedProgram::defines): the one that holds its instance there; or null.
  LinkedProgram *defining(uint32_t id, std::string_view name, const backend::Device *device) const;
  /// The program on `device` that keeps a copy of image `id`'s variable `name` (LinkedProgram::copies);
  /// or null.
  LinkedProgram *copying(uint32_t id, std::string_view name, const backend::Device *device) const;
  /// Whether any program was made for `device`.
  bool anyOn(const backend::Device *device) const;
  /// The binary of `key`'s program kept for another device of `device`'s model, its source left
  /// for the caller to name (it tells devices of one name apart); none where no such program kept
  /// one.
  SameModel sameModel(const backend::Device &device, const ProgramKey &key) const;

  /// A thread's turn to build one program in the process; the others asking for it wait until
  /// it is finished (destroyed, the caller's mutex held), then look in memory again.
  class Turn {
   public:
    Turn(Turn &&other) noexcept : cache_(std::exchange(other.cache_, nullptr)), of_(std::move(other.of_)) {}
    Turn &operator=(Turn &&) = delete;
    ~Turn();

   private:
    friend class ProgramCache;
    using Of = std::pair<const backend::Device *, ProgramKey>;
    Turn(ProgramCache *cache, Of of) : cache_(cache), of_(std::move(of)) {}
    ProgramCache *cache_;  // null: a build beside another's (see takeTurn), or moved from
    Of of_;
  };
  /// Build once in the process: the turn to build `key` on `device`, where no other thread has
  /// it. Where one has, waits (`held`, the caller's lock, let go meanwhile) until it finishes and
  /// gives nullopt: look in memory again. A thread that may hold the host loader's lock, not
  /// shown free of it within hostLockWait, builds beside the other instead (the other may be
  /// waiting for that lock): the first program kept serves both.
  std::optional<Turn> takeTurn(std::unique_lock<std::mutex> &held, const backend::Device *device,
                               const ProgramKey &key);

  /// The program of `inputs` (a plan's images, in plan order; `key` their hashes), its cells set
  /// to `instances` (the variables the inputs reach elsewhere: image/instance_cells.h): loaded from
  /// `sameModel`'s binary where there is one and `device` takes it, else the binary store's where
  /// it has one `device` loads, else linked by `device` and stored. With `runtime`, the program
  /// is linked for that runtime and loaded by it, never from another device's binary, and its
  /// binary, which the runtime reads while the program lives, comes back with it. Build once across processes:
  /// where another process builds it (the store's build lock), its entry is waited for. Errors
  /// are the device's (they name the image and symbol); a binary the device refuses is dropped
  /// from the store and the program linked. With `keepBinary` (another device of the model is in
  /// use), the program's binary comes back with it.
  llvm::Expected<Built> build(backend::Device &device, const ProgramKey &key, std::span<const backend::LinkInput> inputs,
                              std::span<const InstanceAddress> instances = {}, const SameModel &sameModel = {},
                              bool keepBinary = false, const backend::RuntimeLoad *runtime = nullptr);
  /// Takes `program` out of the cache whatever still needs it: its runtime unloaded it
  /// (backend::RuntimeLoad). The programs it reached are needed one borrower less; what it kept
  /// goes to `released`, as dropUses gives it.
  std::unique_ptr<LinkedProgram> release(LinkedProgram *program, std::vector<std::shared_ptr<const void>> &released);
  /// Keeps a program made by build() from `images` (with `interposed` made local in each), for the
  /// plans it serves.
  LinkedProgram *add(ProgramKey key, std::vector<uint32_t> images, std::vector<std::vector<std::string_view>> interposed,
                     std::vector<LinkedProgram::Use> uses, backend::Device *device,
                     std::shared_ptr<backend::Program> program, std::shared_ptr<const std::string> binary = nullptr);
  /// Drops the plans rooted at `roots` (images unloaded) and returns the programs no longer
  /// needed (LinkedProgram::needed, `loaded` telling which images are), which the caller
  /// releases with the images they hold. What the dropped plans and programs kept (their pins,
  /// the native programs) goes to `released`, for the caller to let go when it may call the host
  /// loader and the backend.
  std::vector<std::unique_ptr<LinkedProgram>> dropUses(std::span<const uint32_t> roots,
                                                       llvm::function_ref<bool(uint32_t)> loaded,
                                                       std::vector<std::shared_ptr<const void>> &released);
  /// Whether `program` is one of this cache's.
  bool contains(const LinkedProgram *program) const;
  /// Every program kept, in the order they were made.
  const std::vector<std::unique_ptr<LinkedProgram>> &all() const { return programs_; }

 private:
  store::BinaryStore &(*store_)();
  const std::chrono::milliseconds hostLockWait_;
  std::vector<std::unique_ptr<LinkedProgram>> programs_;
  // The builds under way in the process, by device and key; `finished_` wakes their waiters.
  std::map<Turn::Of, std::shared_ptr<bool>> building_;  // -> whether it finished, for its waiters
  std::condition_variable finished_;
};

}  // namespace devdl::cache
