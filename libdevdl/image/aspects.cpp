#include "image/aspects.h"

#include "support/error.h"

#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Endian.h>

#include <utility>

namespace devdl {

namespace {

constexpr std::pair<uint32_t, std::string_view> kNames[] = {
    {aspect::cpu, "cpu"},
    {aspect::gpu, "gpu"},
    {aspect::accelerator, "accelerator"},
    {aspect::custom, "custom"},
    {aspect::fp16, "fp16"},
    {aspect::fp64, "fp64"},
    {aspect::int64_base_atomics, "int64_base_atomics"},
    {aspect::int64_extended_atomics, "int64_extended_atomics"},
    {aspect::image, "image"},
    {aspect::online_compiler, "online_compiler"},
    {aspect::online_linker, "online_linker"},
    {aspect::queue_profiling, "queue_profiling"},
    {aspect::usm_device_allocations, "usm_device_allocations"},
    {aspect::usm_host_allocations, "usm_host_allocations"},
    {aspect::usm_shared_allocations, "usm_shared_allocations"},
    {aspect::usm_restricted_shared_allocations, "usm_restricted_shared_allocations"},
    {aspect::usm_system_allocations, "usm_system_allocations"},
    {aspect::usm_atomic_host_allocations, "usm_atomic_host_allocations"},
    {aspect::usm_atomic_shared_allocations, "usm_atomic_shared_allocations"},
    {aspect::atomic64, "atomic64"},
    {aspect::host_debuggable, "host_debuggable"},
    {aspect::emulated, "emulated"},
};

}  // namespace

std::string_view aspectName(uint32_t number) {
  for (const auto &[n, name] : kNames)
    if (n == number) return name;
  return {};
}

std::string aspectText(uint32_t number) {
  const std::string_view name = aspectName(number);
  return name.empty() ? std::to_string(number) : std::string(name);
}

std::optional<uint32_t> aspectNumber(std::string_view nameOrNumber) {
  const llvm::StringRef text = llvm::StringRef(nameOrNumber.data(), nameOrNumber.size()).trim();
  unsigned number = 0;
  if (!text.getAsInteger(0, number)) return number;
  for (const auto &[n, name] : kNames)
    if (text == llvm::StringRef(name.data(), name.size())) return n;
  return std::nullopt;
}

llvm::Expected<std::vector<uint32_t>> requiredAspects(const DeviceImage &image) {
  std::vector<uint32_t> aspects;
  const PropertySet *set = image.findSet(kDeviceRequirementsSet);
  const Property *property = set ? set->find("aspects") : nullptr;
  if (!property) return aspects;
  if (property->type != PropertyType::ByteArray || property->data.size() % 4 != 0)
    return fail(ErrorCode::BadFormat, std::string(kDeviceRequirementsSet) +
                                             " aspects: expected a byte array of uint32 values");
  for (size_t i = 0; i < property->data.size(); i += 4)
    aspects.push_back(llvm::support::endian::read32le(property->data.data() + i));
  return aspects;
}

}  // namespace devdl
