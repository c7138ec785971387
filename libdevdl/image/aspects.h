// SYCL's optional device features ("aspects"): the numbers an image records in its
// `SYCL/device requirements` property set (`aspects`: little-endian uint32 values), numbered as
// DPC++ numbers them, and the names people write.
#pragma once

#include "image/device_image.h"

#include <llvm/Support/Error.h>

#include <bitset>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace devdl {

namespace aspect {
enum : uint32_t {
  cpu = 1, gpu = 2, accelerator = 3, custom = 4, fp16 = 5, fp64 = 6, int64_base_atomics = 7,
  int64_extended_atomics = 8, image = 9, online_compiler = 10, online_linker = 11, queue_profiling = 12,
  usm_device_allocations = 13, usm_host_allocations = 14, usm_shared_allocations = 15,
  usm_restricted_shared_allocations = 16, usm_system_allocations = 17, usm_atomic_host_allocations = 26,
  usm_atomic_shared_allocations = 27, atomic64 = 28, host_debuggable = 32, emulated = 40,
};
}  // namespace aspect

/// The aspects a device has, by number (those devdl knows are all below 64).
using AspectSet = std::bitset<64>;

/// "fp64"; "" for a number devdl has no name for.
std::string_view aspectName(uint32_t number);
/// "fp64", or "99" for a number devdl has no name for.
std::string aspectText(uint32_t number);
/// "aspect fp64", or "aspect 99".
inline std::string aspectWords(uint32_t number) { return "aspect " + aspectText(number); }
/// The number of a name ("fp64") or of a number written out ("6").
std::optional<uint32_t> aspectNumber(std::string_view nameOrNumber);

/// The aspects `image` requires, in the order recorded; an error naming the image's property
/// where its value is not a whole number of uint32s.
llvm::Expected<std::vector<uint32_t>> requiredAspects(const DeviceImage &image);

}  // namespace devdl
