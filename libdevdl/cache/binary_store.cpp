#include "cache/binary_store.h"

#include "support/xxh3.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/Endian.h>

namespace devdl::cache {

// Not snprintf: a cache hit is often in a fresh process, where printf's code is a few page faults
// of its own.
std::string Key::hex() const {
  uint8_t bytes[16];
  llvm::support::endian::write64be(bytes, high);
  llvm::support::endian::write64be(bytes + 8, low);
  llvm::SmallString<32> text;
  llvm::toHex(bytes, /*LowerCase=*/true, text);
  return std::string(text);
}

KeyBuilder &KeyBuilder::add(std::string_view part) {
  add(static_cast<uint64_t>(part.size()));
  parts_.append(part);
  return *this;
}

KeyBuilder &KeyBuilder::add(uint64_t value) {
  parts_.append(reinterpret_cast<const char *>(&value), sizeof value);
  return *this;
}

Key KeyBuilder::finish() const {
  const xxh3::Hash128 hash = xxh3::hash128(parts_.data(), parts_.size());
  return {hash.low, hash.high};
}

}  // namespace devdl::cache
