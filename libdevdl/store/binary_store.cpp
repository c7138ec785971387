#include "store/binary_store.h"

#include "support/xxh3.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/Endian.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace devdl::store {

namespace {

// The entry header: host byte order. Entries are for machines of one kind: a remote store is
// shared by the nodes of a cluster, and an entry of another byte order fails its checks.
constexpr char kMagic[8] = {'D', 'E', 'V', 'D', 'L', 'P', 'C', '\n'};
// 2: the binary right after the header, at an offset drivers can read it from in place.
constexpr uint32_t kFormatVersion = 2;
constexpr size_t kChecksumOffset = 56;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t headerSize;
  uint64_t keyLow, keyHigh;
  uint64_t descriptionSize;
  uint64_t binarySize;
  uint64_t buildNanoseconds;
  uint64_t checksum;
};
static_assert(sizeof(Header) == Entry::kHeaderSize && offsetof(Header, checksum) == kChecksumOffset);

uint64_t checksumOf(const Header &header, std::string_view binary, std::string_view description) {
  return xxh3::hash64({std::string_view(reinterpret_cast<const char *>(&header), kChecksumOffset), binary, description});
}

}  // namespace

std::string entryHeader(const Key &key, std::string_view description, std::string_view binary,
                        uint64_t buildNanoseconds) {
  Header header{};
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.version = kFormatVersion;
  header.headerSize = Entry::kHeaderSize;
  header.keyLow = key.low;
  header.keyHigh = key.high;
  header.descriptionSize = description.size();
  header.binarySize = binary.size();
  header.buildNanoseconds = buildNanoseconds;
  header.checksum = checksumOf(header, binary, description);
  return std::string(reinterpret_cast<const char *>(&header), sizeof header);
}

std::string verifyEntry(std::unique_ptr<llvm::MemoryBuffer> bytes, const Key &key, Entry &out) {
  const uint64_t size = bytes->getBufferSize();
  if (size < Entry::kHeaderSize) return "truncated (" + std::to_string(size) + " bytes)";
  Header header;
  std::memcpy(&header, bytes->getBufferStart(), sizeof header);
  if (std::memcmp(header.magic, kMagic, sizeof kMagic) != 0) return "not a devdl cache entry";
  if (header.version != kFormatVersion)
    return "format version " + std::to_string(header.version) + " (this devdl reads " +
           std::to_string(kFormatVersion) + ")";
  if (header.headerSize != Entry::kHeaderSize)
    return "a header of " + std::to_string(header.headerSize) + " bytes (the format's is " +
           std::to_string(Entry::kHeaderSize) + ")";
  if (header.keyLow != key.low || header.keyHigh != key.high) return "holds another key than its name";
  if (header.descriptionSize > Entry::kMaxDescription || header.binarySize > size ||
      Entry::kHeaderSize + header.descriptionSize + header.binarySize != size)
    return "truncated or padded (" + std::to_string(size) + " bytes, header says " +
           std::to_string(Entry::kHeaderSize + std::min(header.descriptionSize, size) + std::min(header.binarySize, size)) +
           ")";
  out.file = std::move(bytes);
  out.binarySize = header.binarySize;
  if (checksumOf(header, out.binary(), out.description()) != header.checksum) return "checksum mismatch";
  out.buildNanoseconds = header.buildNanoseconds;
  return "";
}

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

}  // namespace devdl::store
