// The packed format: a bundle is a sequence of LLVM OffloadBinary envelopes (version 1), one
// device image each, back to back at 8-byte alignment. docs/bundle-format.md specifies it.
//
// LLVM writes and lists these (llvm-objdump --offloading); its reader trusts the entry and
// string offsets, so devdl reads them with its own, which checks every offset and size.
#pragma once

#include "support/bytes.h"

#include <llvm/Support/Error.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace devdl::bundle {

/// LLVM's OffloadBinary image kinds (llvm/Object/OffloadBinary.h, LLVM 15).
enum class ImageKind : uint16_t { None = 0, Object = 1, Bitcode = 2, Cubin = 3, Fatbinary = 4, Ptx = 5 };

inline constexpr uint8_t kMagic[4] = {0x10, 0xFF, 0x10, 0xAD};
inline constexpr uint32_t kVersion = 1;
inline constexpr size_t kHeaderSize = 32, kEntrySize = 40, kStringEntrySize = 16, kAlignment = 8;

/// One envelope: its image and string table (key, value) pairs, viewed in place.
struct Entry {
  ImageKind imageKind = ImageKind::None;
  uint16_t offloadKind = 0;
  uint32_t flags = 0;
  std::vector<std::pair<std::string_view, std::string_view>> strings;
  Bytes image;
  uint64_t offset = 0;  // of the envelope within the bundle, for messages

  /// The value of `key`, or nullopt.
  std::optional<std::string_view> get(std::string_view key) const;
};

/// True if `bytes` begins with the OffloadBinary magic.
bool isBundle(Bytes bytes);

/// Appends the envelopes of `entries` to `out`: keys sorted, so equal input gives equal bytes.
void writeBundle(const std::vector<Entry> &entries, std::string &out);

/// Reads every envelope of `bytes` (zero padding between envelopes is skipped). Fails with
/// BadFormat naming the offset of the first envelope whose header, strings or image do not fit.
llvm::Expected<std::vector<Entry>> readBundle(Bytes bytes);

}  // namespace devdl::bundle
