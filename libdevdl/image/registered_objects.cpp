#include "image/registered_objects.h"

#include <llvm/Support/Endian.h>

namespace devdl {

namespace {

uint32_t word(std::string_view data, size_t i) { return llvm::support::endian::read32le(data.data() + 4 * i); }

std::vector<SpecConstantPart> triples(std::string_view data) {
  std::vector<SpecConstantPart> parts;
  if (data.size() % 12 != 0) return parts;
  for (size_t i = 0; i < data.size() / 4; i += 3) parts.push_back({word(data, i), word(data, i + 1), word(data, i + 2)});
  return parts;
}

}  // namespace

std::optional<DeviceGlobal> deviceGlobalOf(const DeviceImage &image, std::string_view uniqueId) {
  const PropertySet *set = image.findSet(kDeviceGlobalsSet);
  const Property *p = set ? set->find(uniqueId) : nullptr;
  if (!p || p->type != PropertyType::ByteArray || p->data.size() < 8) return std::nullopt;
  const std::string_view variable = p->data.size() > 8 ? p->data.substr(8) : uniqueId;
  return DeviceGlobal{variable, word(p->data, 0)};
}

std::vector<SpecConstantPart> specConstantPartsOf(const DeviceImage &image, std::string_view uniqueId) {
  const PropertySet *set = image.findSet(kSpecConstantsSet);
  const Property *p = set ? set->find(uniqueId) : nullptr;
  if (!p || p->type != PropertyType::ByteArray) return {};
  return triples(p->data);
}

bool declaresSpecId(const Property &property, uint32_t specId) {
  if (property.type == PropertyType::UInt32) return property.u32 == specId;
  if (property.type != PropertyType::ByteArray) return false;
  for (const SpecConstantPart &part : triples(property.data))
    if (part.specId == specId) return true;
  return false;
}

}  // namespace devdl
