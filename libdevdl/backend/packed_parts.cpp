#include "backend/packed_parts.h"
#include "support/error.h"

#include <cstdint>

namespace devdl::backend {

std::string packParts(std::string_view magic, std::span<const PartBinary> parts) {
  auto putSize = [](std::string &out, uint64_t size) {
    for (int i = 0; i < 8; ++i) out += static_cast<char>(size >> (8 * i));
  };
  std::string out(magic);
  for (const PartBinary &part : parts) {
    std::string names;
    for (const std::string &name : part.names) (names += name) += '\0';
    putSize(out, names.size());
    out += names;
    putSize(out, part.binary.size());
    out += part.binary;
  }
  return out;
}

llvm::Expected<std::vector<PartBinary>> unpackParts(std::string_view magic, std::string_view binary,
                                                    std::string_view what) {
  if (!isPackedParts(magic, binary)) return fail(ErrorCode::BadFormat, "not a program of several " + llvm::Twine(what));
  std::string_view rest = binary.substr(magic.size());
  auto take = [&](std::string_view &out) {
    if (rest.size() < 8) return false;
    uint64_t size = 0;
    for (int i = 0; i < 8; ++i) size |= uint64_t(static_cast<uint8_t>(rest[i])) << (8 * i);
    rest.remove_prefix(8);
    if (size > rest.size()) return false;
    out = rest.substr(0, size);
    rest.remove_prefix(size);
    return true;
  };
  std::vector<PartBinary> parts;
  while (!rest.empty()) {
    std::string_view names, bytes;
    if (!take(names) || !take(bytes) || (!names.empty() && names.back() != '\0'))
      return fail(ErrorCode::BadFormat, "a program of several " + llvm::Twine(what) + " is cut short or garbled at part " +
                                            llvm::Twine(parts.size()));
    PartBinary &part = parts.emplace_back(PartBinary{std::string(bytes), {}});
    for (size_t end; !names.empty(); names.remove_prefix(end + 1)) {
      end = names.find('\0');
      part.names.emplace_back(names.substr(0, end));
    }
  }
  if (parts.empty()) return fail(ErrorCode::BadFormat, "a program of several " + llvm::Twine(what) + " holds none");
  return parts;
}

}  // namespace devdl::backend
