#include "backend/registry.h"
#include "backend/cuda/cuda_device.h"
#include "backend/level_zero/ze_device.h"
#include "backend/opencl/opencl_device.h"
#include "support/debug.h"
#include "support/error.h"
#include "support/waiting.h"

#include "devdl.h"

#include <llvm/ADT/STLExtras.h>

#include <algorithm>
#include <cstdint>

namespace devdl::backend {

namespace {

constexpr LinkFamily kSpirv[] = {LinkFamily::Spirv};
constexpr LinkFamily kCuda[] = {LinkFamily::Cuda};

// Each row's functions adapt the backend's own; the C API's devdl_native carries its objects.
const BackendEntry kBuiltin[] = {
    {DEVDL_BACKEND_OPENCL, "opencl", "", kSpirv,
     [] { return llvm::Expected<std::unique_ptr<Device>>(opencl::Device::openDefault()); },
     [](const devdl_native &native) {
       return llvm::Expected<std::unique_ptr<Device>>(opencl::Device::attach(
           static_cast<cl_device_id>(native.device), static_cast<cl_context>(native.context)));
     }},
    {DEVDL_BACKEND_CUDA, "cuda", "", kCuda,
     [] { return llvm::Expected<std::unique_ptr<Device>>(cuda::Device::openDefault()); },
     [](const devdl_native &native) {
       return llvm::Expected<std::unique_ptr<Device>>(
           cuda::Device::attach(static_cast<int>(reinterpret_cast<intptr_t>(native.device)), native.context));
     }},
    {DEVDL_BACKEND_LEVEL_ZERO, "level_zero", "level-zero", kSpirv,
     [] { return llvm::Expected<std::unique_ptr<Device>>(level_zero::Device::openDefault()); },
     [](const devdl_native &native) {
       return llvm::Expected<std::unique_ptr<Device>>(level_zero::Device::attach(
           static_cast<ze_driver_handle_t>(native.platform), static_cast<ze_device_handle_t>(native.device),
           static_cast<ze_context_handle_t>(native.context)));
     }},
};

bool inBuild(const BackendEntry &entry) { return entry.openDefault != nullptr; }

bool takes(const BackendEntry &row, LinkFamily family) {
  return std::find(row.families.begin(), row.families.end(), family) != row.families.end();
}

}  // namespace

std::span<const BackendEntry> builtinBackends() { return kBuiltin; }

Devices::Devices(std::span<const BackendEntry> table, std::string choice, std::chrono::milliseconds hostLockWait)
    : table_(table),
      choice_(std::move(choice)),
      chosen_(nullptr),
      slots_(new std::atomic<const Opened *>[table.size()]),
      opening_(table.size(), false),
      hostLockWait_(hostLockWait) {
  for (size_t i = 0; i < table.size(); ++i) slots_[i].store(nullptr, std::memory_order_relaxed);
  for (const BackendEntry &row : table_)
    if (!choice_.empty() && (row.name == choice_ || (!row.alias.empty() && row.alias == choice_))) chosen_ = &row;
}

Devices::~Devices() = default;

const BackendEntry *Devices::entry(int number) const {
  for (const BackendEntry &e : table_)
    if (e.number == number) return &e;
  return nullptr;
}

size_t Devices::slotOf(int number) const {
  for (size_t i = 0; i < table_.size(); ++i)
    if (table_[i].number == number) return i;
  return table_.size();
}

std::string Devices::names(bool onlyInBuild) const {
  std::vector<std::string_view> listed;
  for (const BackendEntry &row : table_)
    if (!onlyInBuild || inBuild(row)) listed.push_back(row.name);
  std::string text;
  for (size_t i = 0; i < listed.size(); ++i)
    text += (i == 0 ? "" : i + 1 == listed.size() ? " and " : ", ") + std::string(listed[i]);
  return text;
}

const Devices::Opened *Devices::publish(size_t slot, std::unique_ptr<Opened> opened, bool force) {
  const Opened *expected = slots_[slot].load(std::memory_order_acquire);
  if (!force && expected) return expected;
  if (force) {
    slots_[slot].store(opened.get(), std::memory_order_release);
  } else if (!slots_[slot].compare_exchange_strong(expected, opened.get(), std::memory_order_acq_rel)) {
    return expected;  // another thread opened one first; ours goes
  }
  std::lock_guard lock(published_);
  kept_.push_back(std::move(opened));
  done_.notify_all();
  return kept_.back().get();
}

const Devices::Opened *Devices::open(size_t slot, const BackendEntry &row) {
  auto published = [&] { return slots_[slot].load(std::memory_order_acquire) != nullptr; };
  bool opener = false;
  {
    std::unique_lock lock(published_);
    if (!opening_[slot] && !published()) opening_[slot] = opener = true;
    else if (waitForOther(lock, done_, hostLockWait_, published)) return slots_[slot].load(std::memory_order_acquire);
    // Else the opener may wait for the host loader's lock this thread holds: one more is opened.
  }
  auto made = std::make_unique<Opened>();
  auto device = inBuild(row) ? row.openDefault()
                             : llvm::Expected<std::unique_ptr<Device>>(fail(
                                   ErrorCode::Unsupported, "the " + std::string(row.name) + " backend is not in this build"));
  if (device) made->device = std::move(*device);
  else made->error = llvm::toString(device.takeError());
  Opened *mine = made.get();
  const Opened *opened = publish(slot, std::move(made), /*force=*/false);
  if (opener) {
    std::lock_guard lock(published_);
    opening_[slot] = false;
  }
  if (opened == mine && opened->device && Debug::get().on(Debug::Libs))
    Debug::get().print("backend " + std::string(row.name) + ": device " + opened->device->name() + ", linking by " +
                       std::string(opened->device->linkMethod()));
  return opened;
}

llvm::Expected<Device *> Devices::device(int number) {
  const BackendEntry *row = entry(number);
  if (!row) return fail(ErrorCode::InvalidArgument, "unknown backend " + std::to_string(number));
  const size_t slot = slotOf(number);
  const Opened *opened = slots_[slot].load(std::memory_order_acquire);
  if (!choice_.empty()) {
    if (!chosen_)
      return fail(ErrorCode::Unsupported, "DEVDL_BACKEND=" + choice_ + ": no such backend (" + names() + " are)");
    // A device the program attached to is used whatever the variable says.
    if (chosen_ != row && !(opened && opened->device))
      return fail(ErrorCode::NotFound,
                  "the " + std::string(row->name) + " backend is not used: DEVDL_BACKEND=" + choice_);
  }
  if (!opened) opened = open(slot, *row);
  if (!opened->device) return fail(ErrorCode::NotFound, opened->error);
  return opened->device.get();
}

Device *Devices::opened(int number) const {
  const size_t slot = slotOf(number);
  if (slot == table_.size()) return nullptr;
  const Opened *opened = slots_[slot].load(std::memory_order_acquire);
  return opened ? opened->device.get() : nullptr;
}

bool Devices::opensNothingFor(const DeviceImage &image) const {
  const LinkFamily family = linkFamily(image.format);
  for (size_t i = 0; i < table_.size(); ++i) {
    const BackendEntry &row = table_[i];
    if (!takes(row, family)) continue;
    const Opened *opened = slots_[i].load(std::memory_order_acquire);
    if (opened && opened->device) return true;  // forImage stops at it
    const bool allowed = choice_.empty() || chosen_ == &row;
    if (!opened && allowed && inBuild(row)) return false;  // forImage would open it
  }
  return true;
}

llvm::Expected<Device *> Devices::forImage(const DeviceImage &image) {
  const LinkFamily family = linkFamily(image.format);
  // The first reason of a backend DEVDL_BACKEND allows, else of one it turned off.
  std::string first, turnedOff;
  for (const BackendEntry &row : table_) {
    if (!takes(row, family)) continue;
    auto dev = device(row.number);
    if (dev) return *dev;
    std::string &reason = choice_.empty() || chosen_ == &row ? first : turnedOff;
    if (reason.empty()) reason = llvm::toString(dev.takeError());
    else llvm::consumeError(dev.takeError());
  }
  if (first.empty()) first = std::move(turnedOff);
  return fail(ErrorCode::Unsupported,
              first.empty() ? "no backend links " + std::string(formatName(image.format)) + " images" : first);
}

int Devices::defaultBackend() {
  if (!choice_.empty()) return chosen_ ? chosen_->number : table_.front().number;  // device() says no such backend
  for (const BackendEntry &row : table_)
    if (opened(row.number)) return row.number;
  for (const BackendEntry &row : table_) {
    if (!inBuild(row)) continue;
    auto dev = device(row.number);
    if (dev) return row.number;
    llvm::consumeError(dev.takeError());
  }
  return table_.front().number;
}

llvm::Expected<Device *> Devices::forNative(const devdl_native &native) {
  const BackendEntry *row = entry(native.backend);
  if (!row || !inBuild(*row))
    return fail(ErrorCode::Unsupported, "backend " + std::to_string(native.backend) + " is not in this build (" +
                                            names(/*inBuild=*/true) + " are)");
  auto sameAs = [&](const Device &device) {
    devdl_native its{sizeof its, 0, nullptr, nullptr, nullptr};
    device.native(its);
    return its.device == native.device && (!native.context || its.context == native.context);
  };
  if (Device *current = opened(native.backend); current && sameAs(*current)) return current;
  auto known = [&]() -> Device * {
    for (const Named &named : named_)
      if (named.backend == native.backend && named.device == native.device && named.context == native.context)
        return named.opened.get();
    return nullptr;
  };
  {
    std::lock_guard lock(published_);
    if (Device *device = known()) return device;
  }
  auto attached = row->attach(native);
  if (!attached) return attached.takeError();
  Device *device = nullptr;
  {
    std::lock_guard lock(published_);
    if (Device *other = known()) return other;  // another thread attached it meanwhile: ours goes
    named_.push_back({native.backend, native.device, native.context, std::move(*attached)});
    used_.push_back(device = named_.back().opened.get());
  }
  if (Debug::get().on(Debug::Libs))  // label() takes the lock
    Debug::get().print("backend " + std::string(row->name) + ": device " + label(device) + " for views, linking by " +
                       std::string(device->linkMethod()));
  return device;
}

bool Devices::links(const Device &device, LinkFamily family) const {
  const BackendEntry *row = entry(device.backend());
  return row && takes(*row, family);
}

std::vector<const Device *> Devices::inUse() const {
  std::vector<const Device *> used;
  for (const BackendEntry &row : table_)
    if (Device *opened = this->opened(row.number)) used.push_back(opened);
  std::lock_guard lock(published_);
  for (const Device *device : used_)
    if (!llvm::is_contained(used, device)) used.push_back(device);
  return used;
}

bool Devices::modelShared(const Device &device) const {
  if (!device.binaryLoadsOnAnotherDevice()) return false;
  return llvm::any_of(inUse(), [&](const Device *other) {
    return other != &device && other->identity() == device.identity();
  });
}

std::string Devices::label(const Device *device) const {
  size_t same = 0, mine = 0;
  for (const Device *other : inUse())
    if (other->name() == device->name()) {
      ++same;
      if (other == device) mine = same;
    }
  return same > 1 && mine ? device->name() + " #" + std::to_string(mine) : device->name();
}

void Devices::replace(std::unique_ptr<Device> device) {
  const size_t slot = slotOf(device->backend());
  auto opened = std::make_unique<Opened>();
  opened->device = std::move(device);
  publish(slot, std::move(opened), /*force=*/true);
}

}  // namespace devdl::backend
