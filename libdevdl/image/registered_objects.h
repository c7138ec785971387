// What an image says of the host objects SYCL identifies by a unique id (seed 002): the device
// globals and specialization constants it defines, each keyed by the unique id under which the
// host registers the object's address (host/object_registry.h).
#pragma once

#include "image/device_image.h"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace devdl {

inline constexpr std::string_view kDeviceGlobalsSet = "SYCL/device globals";

/// A device global: the image's variable and the host object's size.
struct DeviceGlobal {
  std::string_view variable;
  uint32_t size = 0;
};

/// `SYCL/device globals`, property `uniqueId`: a byte array of uint32 size and uint32
/// device_image_scope, as DPC++ writes it, then (devdl's) the variable's name where it is not the
/// unique id itself. nullopt where the image has no such property, or a malformed one.
std::optional<DeviceGlobal> deviceGlobalOf(const DeviceImage &image, std::string_view uniqueId);

/// One scalar of a specialization constant's value: its SpecId, and where it is in the host
/// object's value.
struct SpecConstantPart {
  uint32_t specId, offset, size;
};

/// `SYCL/specialization constants`, property `uniqueId`: a byte array of {SpecId, offset, size}
/// uint32 triples, as DPC++ writes it (a composite has one for each scalar). Empty where the image
/// has no such property, or a malformed one.
std::vector<SpecConstantPart> specConstantPartsOf(const DeviceImage &image, std::string_view uniqueId);

/// Whether a `SYCL/specialization constants` property declares `specId`: a SpecId (u32) as the
/// SPIR-V reader records them, or one of a unique id's triples.
bool declaresSpecId(const Property &property, uint32_t specId);

}  // namespace devdl
