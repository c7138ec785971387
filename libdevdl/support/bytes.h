// Bytes: a view of bytes in memory, as files, images and bundles are read, and its text.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace devdl {

using Bytes = std::span<const uint8_t>;

inline std::string_view asText(Bytes b) {
  return {reinterpret_cast<const char *>(b.data()), b.size()};
}
inline Bytes asBytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t *>(s.data()), s.size()};
}

}  // namespace devdl
