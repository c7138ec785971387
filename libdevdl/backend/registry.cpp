#include "backend/registry.h"
#include "backend/cuda/cuda_device.h"
#include "backend/opencl/opencl_device.h"
#include "support/debug.h"
#include "support/error.h"

#include "devdl.h"

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
    {DEVDL_BACKEND_LEVEL_ZERO, "level_zero", "level-zero", {}, nullptr, nullptr},
};

bool inBuild(const BackendEntry &entry) { return entry.openDefault != nullptr; }

}  // namespace

std::span<const BackendEntry> builtinBackends() { return kBuiltin; }

Devices::Devices(std::span<const BackendEntry> table, std::string choice)
    : table_(table), choice_(std::move(choice)), slots_(table.size()) {}

Devices::~Devices() = default;

const BackendEntry *Devices::entry(int number) const {
  for (const BackendEntry &e : table_)
    if (e.number == number) return &e;
  return nullptr;
}

Devices::Slot *Devices::slotOf(int number) {
  for (size_t i = 0; i < table_.size(); ++i)
    if (table_[i].number == number) return &slots_[i];
  return nullptr;
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

llvm::Expected<Device *> Devices::device(int number) {
  const BackendEntry *row = entry(number);
  if (!row) return fail(ErrorCode::InvalidArgument, "unknown backend " + std::to_string(number));
  Slot &slot = *slotOf(number);
  if (!choice_.empty()) {
    const BackendEntry *named = nullptr;
    for (const BackendEntry &e : table_)
      if (e.name == choice_ || (!e.alias.empty() && e.alias == choice_)) named = &e;
    if (!named)
      return fail(ErrorCode::Unsupported, "DEVDL_BACKEND=" + choice_ + ": no such backend (" + names() + " are)");
    // A device the program attached to is used whatever the variable says.
    if (named != row && !slot.device)
      return fail(ErrorCode::NotFound,
                  "the " + std::string(row->name) + " backend is not used: DEVDL_BACKEND=" + choice_);
  }
  if (!slot.tried) {
    slot.tried = true;
    auto opened = inBuild(*row) ? row->openDefault()
                                : llvm::Expected<std::unique_ptr<Device>>(fail(
                                      ErrorCode::Unsupported, "the " + std::string(row->name) + " backend is not in this build"));
    if (opened) {
      slot.device = std::move(*opened);
      if (Debug::get().on(Debug::Libs))
        Debug::get().print("backend " + std::string(row->name) + ": device " + slot.device->name() + ", linking by " +
                           std::string(slot.device->linkMethod()));
    } else {
      slot.error = llvm::toString(opened.takeError());
    }
  }
  if (!slot.device) return fail(ErrorCode::NotFound, slot.error);
  return slot.device.get();
}

Device *Devices::opened(int number) const {
  for (size_t i = 0; i < table_.size(); ++i)
    if (table_[i].number == number) return slots_[i].device.get();
  return nullptr;
}

Device *Devices::forImage(const DeviceImage &image, std::string *why) {
  const LinkFamily family = linkFamily(image.format);
  std::string first;
  for (const BackendEntry &row : table_) {
    if (std::find(row.families.begin(), row.families.end(), family) == row.families.end()) continue;
    auto dev = device(row.number);
    if (dev) return *dev;
    std::string reason = llvm::toString(dev.takeError());
    if (first.empty()) first = std::move(reason);
  }
  if (why) *why = first.empty() ? "no backend links " + std::string(formatName(image.format)) + " images" : first;
  return nullptr;
}

int Devices::defaultBackend() {
  if (!choice_.empty()) {
    for (const BackendEntry &e : table_)
      if (e.name == choice_ || (!e.alias.empty() && e.alias == choice_)) return e.number;
    return table_.front().number;  // device() says the name is no backend's
  }
  for (size_t i = 0; i < table_.size(); ++i)
    if (slots_[i].device) return table_[i].number;
  for (const BackendEntry &row : table_) {
    if (!inBuild(row)) continue;
    auto dev = device(row.number);
    if (dev) return row.number;
    llvm::consumeError(dev.takeError());
  }
  return table_.front().number;
}

std::unique_ptr<Device> Devices::replace(std::unique_ptr<Device> device) {
  Slot &slot = *slotOf(device->backend());
  slot.tried = true;
  std::swap(slot.device, device);
  return device;
}

}  // namespace devdl::backend
