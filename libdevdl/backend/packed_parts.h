// A program linked in parts (backend/partition.h) as the one binary the disk cache keeps: a line
// naming what the parts are ("devdl CUDA modules\n"), then each part's names and driver binary
// (docs/cache-format.md). Each backend loads every part and looks each name up in the part that
// holds it.
#pragma once

#include <llvm/Support/Error.h>

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace devdl::backend {

/// One part of a program: the driver's binary, and the kernels and variables it answers for.
struct PartBinary {
  std::string binary;
  std::vector<std::string> names;
};

/// `magic`, then each part's names (each ended by a NUL) and binary, each after its size as
/// 8 bytes, little-endian.
std::string packParts(std::string_view magic, std::span<const PartBinary> parts);
inline bool isPackedParts(std::string_view magic, std::string_view binary) {
  return binary.substr(0, magic.size()) == magic;
}
/// What packParts wrote with `magic`; fails with BadFormat, calling the parts `what` ("CUDA
/// modules"), where the binary does not hold that.
llvm::Expected<std::vector<PartBinary>> unpackParts(std::string_view magic, std::string_view binary,
                                                    std::string_view what);

}  // namespace devdl::backend
