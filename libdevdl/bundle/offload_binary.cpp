#include "bundle/offload_binary.h"
#include "support/error.h"

#include <llvm/Support/Endian.h>
#include <llvm/Support/MathExtras.h>

#include <algorithm>
#include <cstring>

namespace devdl::bundle {

namespace {

using llvm::support::endian::read16le;
using llvm::support::endian::read32le;
using llvm::support::endian::read64le;

template <typename T>
void put(std::string &out, T value) {
  char buf[sizeof(T)];
  llvm::support::endian::write<T, llvm::support::little, 1>(buf, value);
  out.append(buf, sizeof(T));
}

llvm::Error bad(uint64_t offset, const llvm::Twine &what) {
  return fail(ErrorCode::BadFormat,
              "invalid bundle: envelope at offset " + llvm::Twine(offset) + ": " + what);
}

// Strings may share bytes (LLVM's StringTableBuilder tail-merges them), so an envelope's string
// entries may refer to more bytes than it holds: entries all pointing into one long string made
// reading (and every use of the strings after) quadratic in the envelope's size. What they may
// refer to in all is this many times its size, and reading stays linear.
constexpr uint64_t kStringBytesPerByte = 4;

// A NUL-terminated string at `at` inside the envelope `env`; its bytes and NUL come out of
// `budget`, the bytes the envelope's strings may still refer to.
llvm::Expected<std::string_view> stringAt(Bytes env, uint64_t at, uint64_t envOffset, uint64_t &budget) {
  if (at >= env.size()) return bad(envOffset, "string offset " + llvm::Twine(at) + " out of range");
  const char *s = reinterpret_cast<const char *>(env.data() + at);
  const uint64_t reach = std::min(env.size() - at, budget);
  const void *nul = std::memchr(s, 0, reach);
  if (!nul && reach == env.size() - at)
    return bad(envOffset, "string at " + llvm::Twine(at) + " is not terminated");
  if (!nul)
    return bad(envOffset, "its string entries refer to more than " +
                              llvm::Twine(kStringBytesPerByte * env.size()) + " bytes of strings (" +
                              llvm::Twine(kStringBytesPerByte) + " times its size)");
  const std::string_view string(s, static_cast<const char *>(nul) - s);
  budget -= string.size() + 1;
  return string;
}

llvm::Expected<Entry> readEnvelope(Bytes env, uint64_t offset) {
  const uint8_t *p = env.data();
  if (read32le(p + 4) != kVersion)
    return bad(offset, "version " + llvm::Twine(read32le(p + 4)) + " (only 1 is known)");
  const uint64_t entryOffset = read64le(p + 16), entrySize = read64le(p + 24);
  if (entrySize < kEntrySize || entryOffset > env.size() || entrySize > env.size() - entryOffset)
    return bad(offset, "entry out of range");
  const uint8_t *e = p + entryOffset;
  Entry entry;
  entry.offset = offset;
  entry.imageKind = static_cast<ImageKind>(read16le(e));
  entry.offloadKind = read16le(e + 2);
  entry.flags = read32le(e + 4);
  const uint64_t stringOffset = read64le(e + 8), numStrings = read64le(e + 16);
  const uint64_t imageOffset = read64le(e + 24), imageSize = read64le(e + 32);
  if (imageOffset > env.size() || imageSize > env.size() - imageOffset)
    return bad(offset, "image of " + llvm::Twine(imageSize) + " bytes at " + llvm::Twine(imageOffset) +
                           " out of range");
  if (stringOffset > env.size() || numStrings > (env.size() - stringOffset) / kStringEntrySize)
    return bad(offset, llvm::Twine(numStrings) + " strings at " + llvm::Twine(stringOffset) +
                           " out of range");
  entry.image = env.subspan(imageOffset, imageSize);
  entry.strings.reserve(numStrings);
  uint64_t budget = kStringBytesPerByte * env.size();
  for (uint64_t i = 0; i < numStrings; ++i) {
    const uint8_t *s = p + stringOffset + i * kStringEntrySize;
    auto key = stringAt(env, read64le(s), offset, budget);
    if (!key) return key.takeError();
    auto value = stringAt(env, read64le(s + 8), offset, budget);
    if (!value) return value.takeError();
    entry.strings.emplace_back(*key, *value);
  }
  return entry;
}

}  // namespace

std::optional<std::string_view> Entry::get(std::string_view key) const {
  for (const auto &[k, v] : strings)
    if (k == key) return v;
  return std::nullopt;
}

bool isBundle(Bytes bytes) {
  return bytes.size() >= sizeof(kMagic) && std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) == 0;
}

void writeBundle(const std::vector<Entry> &entries, std::string &out) {
  for (const Entry &entry : entries) {
    auto strings = entry.strings;
    std::sort(strings.begin(), strings.end());
    // Layout as LLVM writes it: header, entry, string entries, string table, image.
    const uint64_t start = out.size();
    const uint64_t tableOffset = kHeaderSize + kEntrySize + strings.size() * kStringEntrySize;
    std::string table(1, '\0');  // offset 0 is the empty string, as in an ELF string table
    std::vector<std::pair<uint64_t, uint64_t>> offsets;
    for (const auto &[key, value] : strings) {
      uint64_t k = tableOffset + table.size();
      table.append(key).push_back('\0');
      uint64_t v = tableOffset + table.size();
      table.append(value).push_back('\0');
      offsets.emplace_back(k, v);
    }
    const uint64_t imageOffset = llvm::alignTo(tableOffset + table.size(), kAlignment);
    const uint64_t size = llvm::alignTo(imageOffset + entry.image.size(), kAlignment);

    out.append(reinterpret_cast<const char *>(kMagic), sizeof(kMagic));
    put<uint32_t>(out, kVersion);
    put<uint64_t>(out, size);
    put<uint64_t>(out, kHeaderSize);
    put<uint64_t>(out, kEntrySize);
    put<uint16_t>(out, static_cast<uint16_t>(entry.imageKind));
    put<uint16_t>(out, entry.offloadKind);
    put<uint32_t>(out, entry.flags);
    put<uint64_t>(out, kHeaderSize + kEntrySize);
    put<uint64_t>(out, strings.size());
    put<uint64_t>(out, imageOffset);
    put<uint64_t>(out, entry.image.size());
    for (const auto &[k, v] : offsets) {
      put<uint64_t>(out, k);
      put<uint64_t>(out, v);
    }
    out += table;
    out.resize(start + imageOffset, '\0');
    out.append(asText(entry.image));
    out.resize(start + size, '\0');
  }
}

llvm::Expected<std::vector<Entry>> readBundle(Bytes bytes) {
  std::vector<Entry> entries;
  uint64_t pos = 0;
  while (pos < bytes.size()) {
    const uint64_t left = bytes.size() - pos;
    // Linkers pad between the bundles of several objects with zeros.
    if (left >= kAlignment && read64le(bytes.data() + pos) == 0) {
      pos += kAlignment;
      continue;
    }
    if (left < kHeaderSize || std::memcmp(bytes.data() + pos, kMagic, sizeof(kMagic)) != 0) {
      if (std::all_of(bytes.begin() + pos, bytes.end(), [](uint8_t b) { return b == 0; })) break;
      return bad(pos, left < kHeaderSize ? "truncated header" : "bad magic");
    }
    const uint64_t size = read64le(bytes.data() + pos + 8);
    if (size < kHeaderSize + kEntrySize || size > left)
      return bad(pos, "size " + llvm::Twine(size) + " does not fit the " + llvm::Twine(left) +
                          " bytes left");
    auto entry = readEnvelope(bytes.subspan(pos, size), pos);
    if (!entry) return entry.takeError();
    entries.push_back(std::move(*entry));
    pos += llvm::alignTo(size, kAlignment);
  }
  return entries;
}

}  // namespace devdl::bundle
