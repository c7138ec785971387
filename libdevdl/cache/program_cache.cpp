#include "cache/program_cache.h"

#include "image/read_image.h"
#include "support/debug.h"
#include "support/error.h"
#include "support/waiting.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/Support/FormatVariadic.h>

#include <chrono>
#include <deque>

namespace devdl::cache {

ContentHash ContentHash::specialized(ContentHash bytes, const backend::SpecConstants &values) {
  if (values.empty()) return bytes;
  store::KeyBuilder builder;
  builder.add(bytes.low).add(bytes.high);
  for (const auto &[spec, value] : values) builder.add(uint64_t(spec)).add(value);
  const store::Key key = builder.finish();
  return {key.low, key.high};
}

ContentHash ContentHash::withInterposed(std::span<const std::string_view> interposed) const {
  if (interposed.empty()) return *this;
  store::KeyBuilder builder;
  builder.add(low).add(high);
  for (std::string_view name : interposed) builder.add(name);
  const store::Key key = builder.finish();
  return {key.low, key.high};
}

ProgramKey ProgramKey::of(const LinkPlan &plan, llvm::function_ref<ContentHash(uint32_t)> hashOf) {
  ProgramKey key;
  for (size_t i = 0; i < plan.images.size(); ++i) key.hashes.push_back(hashOf(plan.images[i]).withInterposed(plan.interposed[i]));
  std::sort(key.hashes.begin(), key.hashes.end());
  return key;
}

store::Key ProgramKey::storeKey(std::string_view deviceIdentity) const {
  store::KeyBuilder builder;
  builder.add(deviceIdentity);
  for (const ContentHash &hash : hashes) builder.add(hash.low).add(hash.high);
  if (!elsewhere.empty()) builder.add(std::string_view("elsewhere"));
  for (const std::string &name : elsewhere) builder.add(std::string_view(name));
  if (forRuntime) builder.add(std::string_view("for a runtime"));
  return builder.finish();
}

LinkedProgram *ProgramCache::find(const backend::Device *device, const ProgramKey &key) const {
  for (const auto &program : programs_)
    if (program->device == device && program->key.includes(key)) return program.get();
  return nullptr;
}

ProgramCache::Turn::~Turn() {
  if (!cache_) return;
  auto it = cache_->building_.find(of_);
  *it->second = true;
  cache_->building_.erase(it);
  cache_->finished_.notify_all();
}

std::optional<ProgramCache::Turn> ProgramCache::takeTurn(std::unique_lock<std::mutex> &held,
                                                        const backend::Device *device, const ProgramKey &key) {
  Turn::Of of{device, key};
  if (auto it = building_.find(of); it != building_.end()) {
    std::shared_ptr<bool> finished = it->second;
    if (waitForOther(held, finished_, hostLockWait_, [&] { return *finished; })) return std::nullopt;
    return Turn(nullptr, std::move(of));
  }
  building_.emplace(of, std::make_shared<bool>(false));
  return Turn(this, std::move(of));
}

LinkedProgram *ProgramCache::defining(uint32_t id, std::string_view name, const backend::Device *device) const {
  for (const auto &program : programs_)
    if (program->device == device && program->defines(id, name)) return program.get();
  return nullptr;
}

LinkedProgram *ProgramCache::copying(uint32_t id, std::string_view name, const backend::Device *device) const {
  for (const auto &program : programs_)
    if (program->device == device && llvm::is_contained(program->copies, std::pair<uint32_t, std::string_view>(id, name)))
      return program.get();
  return nullptr;
}

bool ProgramCache::anyOn(const backend::Device *device) const {
  return llvm::any_of(programs_, [&](const auto &p) { return p->device == device; });
}

SameModel ProgramCache::sameModel(const backend::Device &device, const ProgramKey &key) const {
  for (const auto &program : programs_)
    if (program->binary && program->device != &device && program->key == key &&
        program->device->identity() == device.identity())
      return {program->binary, program->device, {}};
  return {};
}

namespace {

// Sets each cell of `program` to its instance's address: the program is whole then, wherever it
// came from (linked, or a binary, which holds no address of this process).
llvm::Expected<std::unique_ptr<backend::Program>> withCellsSet(llvm::Expected<std::unique_ptr<backend::Program>> program,
                                                              std::span<const InstanceAddress> instances) {
  if (!program) return program;
  for (const InstanceAddress &instance : instances) {
    void *address = instance.address;
    if (llvm::Error err = (*program)->copyVariable(instance.cell, 0, &address, sizeof address, true))
      return fail(ErrorCode::Unsupported, "the address of `" + llvm::Twine(instance.name) +
                                              "`'s instance could not be set in the program that reaches it: " +
                                              llvm::toString(std::move(err)));
  }
  return program;
}

}  // namespace

namespace {

using Clock = std::chrono::steady_clock;

uint64_t nanosecondsSince(Clock::time_point since) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - since).count());
}

// One call of ProgramCache::build: what it was asked, and its phases in the order it tries them.
class Building {
 public:
  Building(backend::Device &device, std::span<const backend::LinkInput> inputs,
           std::span<const InstanceAddress> instances, bool keepBinary, const backend::RuntimeLoad *runtime)
      : device_(device), inputs_(inputs), instances_(instances), keepBinary_(keepBinary), runtime_(runtime) {}

  // Another device of this model linked it in this process: its binary is this device's too.
  std::optional<Built> fromSameModel(const SameModel &sameModel) const {
    auto loaded = withCellsSet(device_.load(*sameModel.binary), instances_);
    if (loaded) return Built{std::move(*loaded), sameModel.source, sameModel.binary};
    if (Debug::get().on(Debug::Statistics))
      Debug::get().print(sameModel.source + ": refused by " + device_.name() + ": " + llvm::toString(loaded.takeError()));
    else
      llvm::consumeError(loaded.takeError());
    return std::nullopt;
  }

  // The store's entry for the plan, where it has one or another process stores one while this one
  // waits its turn (the build lock, held then until the program built here is stored).
  std::optional<Built> fromStore(store::BinaryStore &binaries, const ProgramKey &key) {
    storeKey_ = key.storeKey(device_.identity());
    const auto start = Clock::now();
    std::optional<store::Entry> entry = binaries.load(*storeKey_);
    bool awaited = false;  // the entry came after the miss: another process's, or remote
    if (!entry) {
      if (Debug::get().on(Debug::Statistics) && binaries.enabled())
        Debug::get().print("cache: miss " + storeKey_->hex() + " for " + inputs_.front().label);
      // Another process may be building it: its entry, once stored, beats building it again.
      store::BuildTurn turn = binaries.awaitTurn(*storeKey_);
      awaited = turn.entry.has_value();
      entry = std::move(turn.entry);
      if (!awaited) lock_ = std::move(turn.lock);  // else let go now: the others waiting find the entry too
    }
    if (!entry) return std::nullopt;
    // What came after the miss was reported by the store (the wait, the remote store).
    const uint64_t read = awaited ? 0 : nanosecondsSince(start);
    const auto loading = Clock::now();
    std::shared_ptr<const std::string> keep;
    auto loaded = withCellsSet(load(keep, entry->binary()), instances_);
    if (loaded) {
      const uint64_t load = nanosecondsSince(loading);
      binaries.saved(entry->buildNanoseconds, read + load);
      if (Debug::get().on(Debug::Statistics))
        Debug::get().print("cache: hit " + storeKey_->hex() + " for " + inputs_.front().label + ": " +
                           std::to_string(entry->binary().size()) + " bytes " +
                           (awaited ? "from " + std::string(entry->source)
                                    : "read and verified in " + llvm::formatv("{0:f1}", read / 1e3).str() + " us") +
                           ", loaded by the driver in " + llvm::formatv("{0:f1}", load / 1e3).str() + " us");
      return Built{std::move(*loaded), std::string(entry->source), keep ? keep : kept(entry->binary())};
    }
    llvm::Error refused = loaded.takeError();
    // A sound entry this process cannot take now (the address its variables were placed at is
    // another program's here) stays for the others; the program built instead is not stored.
    busy_ = hasCode(refused, ErrorCode::Busy);
    const std::string why = "refused by " + device_.name() + ": " + llvm::toString(std::move(refused));
    if (busy_)
      binaries.unusable(*storeKey_, why);
    else
      binaries.discard(*storeKey_, why);
    return std::nullopt;
  }

  // The images to link as the link takes them: those taken from their files' summaries read now,
  // for this link only; and every image checked, those of bundles that recorded their symbols too,
  // and linked as the reader leaves it (its bytes in this host's order, laid out as SPIR-V asks);
  // one the SPIR-V validator could not vouch for is linked as such (DeviceImage::unvalidated).
  llvm::Error readInputs() {
    linked_.assign(inputs_.begin(), inputs_.end());
    for (backend::LinkInput &input : linked_) {
      if (!input.image->unread) continue;
      auto image = readUnread(*input.image, files_);
      if (!image) return inImage(image.takeError(), input.label);
      input.image = &read_.emplace_back(std::move(*image));
    }
    // The copy's other views are of the image's own storage, which the image keeps.
    for (backend::LinkInput &input : linked_) {
      auto checked = checkImage(*input.image);
      if (!checked) return inImage(checked.takeError(), input.label);
      if (!*checked) continue;
      DeviceImage &copy = read_.emplace_back(*input.image);
      copy.bytes = (*checked)->bytes;
      if (copy.unvalidated.empty()) copy.unvalidated = (*checked)->unvalidated;
      copy.storage = (*checked)->storage;  // holds the bytes and the verdict read now
      input.image = &copy;
    }
    return llvm::Error::success();
  }

  // The program linked by the device, and stored where the store takes it.
  llvm::Expected<Built> link(store::BinaryStore &binaries) {
    // Asking for the binary costs (PoCL compiles the kernels for it): only when it is stored, or
    // kept for another device of the model.
    const bool storing = storeKey_ && binaries.enabled() && !busy_;
    const bool asking = storing || keepBinary_;
    std::string binary;
    const auto start = Clock::now();
    if (runtime_) {
      auto linkedBinary = device_.linkForRuntime(linked_);
      if (!linkedBinary) return linkedBinary.takeError();
      binary = std::move(*linkedBinary);
    }
    std::shared_ptr<const std::string> keep;
    auto built = withCellsSet(runtime_ ? load(keep, binary) : device_.link(linked_, asking ? &binary : nullptr),
                              instances_);
    if (!built) return built.takeError();
    if (storing && !binary.empty()) {
      std::string description = device_.name();
      for (const backend::LinkInput &input : linked_) description += "\n" + input.label;
      binaries.store(*storeKey_, description, binary, nanosecondsSince(start));
    }
    return Built{std::move(*built), {}, keep ? keep : kept(binary)};
  }

 private:
  std::shared_ptr<const std::string> kept(std::string_view binary) const {
    return (keepBinary_ || runtime_) && !binary.empty() ? std::make_shared<const std::string>(binary) : nullptr;
  }

  // The runtime reads the binary it loads while the program lives: it loads the copy kept.
  llvm::Expected<std::unique_ptr<backend::Program>> load(std::shared_ptr<const std::string> &keep,
                                                        std::string_view binary) const {
    if (!runtime_) return device_.load(binary);
    keep = kept(binary);
    if (!keep) return fail(ErrorCode::Unsupported, "an empty binary");
    return device_.loadThrough(*keep, *runtime_);
  }

  backend::Device &device_;
  std::span<const backend::LinkInput> inputs_;
  std::span<const InstanceAddress> instances_;
  bool keepBinary_;
  const backend::RuntimeLoad *runtime_;
  std::optional<store::Key> storeKey_;
  std::unique_ptr<store::BuildLock> lock_;  // held until the program built here is stored
  bool busy_ = false;  // the entry is sound, but cannot be loaded in this process now
  std::vector<backend::LinkInput> linked_;
  std::deque<DeviceImage> read_;
  UnreadFiles files_;
};

}  // namespace

llvm::Expected<Built> ProgramCache::build(backend::Device &device, const ProgramKey &key,
                                          std::span<const backend::LinkInput> inputs,
                                          std::span<const InstanceAddress> instances, const SameModel &sameModel,
                                          bool keepBinary, const backend::RuntimeLoad *runtime) {
  Building building(device, inputs, instances, keepBinary, runtime);
  if (sameModel.binary && !runtime)
    if (std::optional<Built> built = building.fromSameModel(sameModel)) return std::move(*built);
  store::BinaryStore &binaries = store_();
  if (binaries.enabled())
    if (std::optional<Built> built = building.fromStore(binaries, key)) return std::move(*built);
  if (llvm::Error err = building.readInputs()) return err;
  return building.link(binaries);
}

LinkedProgram *ProgramCache::add(ProgramKey key, std::vector<uint32_t> images,
                                 std::vector<std::vector<std::string_view>> interposed,
                                 std::vector<LinkedProgram::Use> uses, backend::Device *device,
                                 std::shared_ptr<backend::Program> program, std::shared_ptr<const std::string> binary) {
  interposed.resize(images.size());
  programs_.push_back(std::unique_ptr<LinkedProgram>(new LinkedProgram{std::move(key), std::move(images),
                                                                       std::move(interposed), std::move(uses), device,
                                                                       std::move(program), std::move(binary), {}, {}, 0, {}}));
  return programs_.back().get();
}

std::vector<std::unique_ptr<LinkedProgram>> ProgramCache::dropUses(std::span<const uint32_t> roots,
                                                                   llvm::function_ref<bool(uint32_t)> loaded,
                                                                   std::vector<std::shared_ptr<const void>> &released) {
  for (auto &program : programs_)
    llvm::erase_if(program->uses, [&](LinkedProgram::Use &use) {
      if (!llvm::is_contained(roots, use.root)) return false;
      for (auto &pin : use.pins) released.push_back(std::move(pin));
      return true;
    });
  // A program let go may leave the programs whose instances it reached unneeded: until none is.
  std::vector<std::unique_ptr<LinkedProgram>> unused;
  for (bool dropped = true; dropped;) {
    dropped = false;
    for (auto &program : programs_) {
      if (!program || program->needed(loaded)) continue;
      for (LinkedProgram *lender : program->lenders) --lender->borrowers;
      released.push_back(std::move(program->program));
      unused.push_back(std::move(program));
      dropped = true;
    }
  }
  llvm::erase_if(programs_, [](const std::unique_ptr<LinkedProgram> &p) { return !p; });
  return unused;
}

std::unique_ptr<LinkedProgram> ProgramCache::release(LinkedProgram *program,
                                                    std::vector<std::shared_ptr<const void>> &released) {
  auto it = llvm::find_if(programs_, [&](const auto &p) { return p.get() == program; });
  if (it == programs_.end()) return nullptr;
  std::unique_ptr<LinkedProgram> taken = std::move(*it);
  programs_.erase(it);
  for (LinkedProgram::Use &use : taken->uses)
    for (auto &pin : use.pins) released.push_back(std::move(pin));
  taken->uses.clear();
  for (LinkedProgram *lender : taken->lenders) --lender->borrowers;
  // A program reaching its instances is left with cells into memory that is gone, as host code
  // bound to a library dlclose unloaded is: its host object outlived one it needed.
  for (auto &other : programs_) llvm::erase_value(other->lenders, program);
  released.push_back(std::move(taken->program));
  return taken;
}

bool ProgramCache::contains(const LinkedProgram *program) const {
  return llvm::any_of(programs_, [&](const auto &p) { return p.get() == program; });
}

}  // namespace devdl::cache
