#include "store/entry_tag.h"

#include "support/error.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/Support/SHA256.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace devdl::store {

namespace {

constexpr size_t kBlock = 64;  // SHA-256's block, HMAC's B

llvm::ArrayRef<uint8_t> bytesOf(std::string_view text) {
  return {reinterpret_cast<const uint8_t *>(text.data()), text.size()};
}

// HMAC-SHA256 (RFC 2104) of the concatenation of `parts` under `key`, without copying them.
std::array<uint8_t, kTagSize> hmac(std::string_view key, std::initializer_list<std::string_view> parts) {
  std::array<uint8_t, kBlock> block{};
  if (key.size() > kBlock) {
    const std::array<uint8_t, 32> hashed = llvm::SHA256::hash(bytesOf(key));
    std::memcpy(block.data(), hashed.data(), hashed.size());
  } else {
    std::memcpy(block.data(), key.data(), key.size());
  }
  std::array<uint8_t, kBlock> pad;
  llvm::SHA256 inner;
  for (size_t i = 0; i < kBlock; ++i) pad[i] = block[i] ^ 0x36;
  inner.update(pad);
  for (std::string_view part : parts) inner.update(bytesOf(part));
  const std::array<uint8_t, 32> innerHash = inner.final();
  llvm::SHA256 outer;
  for (size_t i = 0; i < kBlock; ++i) pad[i] = block[i] ^ 0x5c;
  outer.update(pad);
  outer.update(innerHash);
  return outer.final();
}

}  // namespace

std::array<uint8_t, kTagSize> hmacSha256(std::string_view key, std::string_view data) { return hmac(key, {data}); }

llvm::Expected<TagKey> TagKey::fromFile(const std::string &path) {
  auto refuse = [&](const std::string &why) {
    return fail(ErrorCode::InvalidArgument, "DEVDL_CACHE_KEY_FILE=" + path + ": " + why);
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return refuse(std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return refuse("not a regular file");
  }
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    ::close(fd);
    return refuse("its group or others may read or write it (chmod 600 it)");
  }
  std::string secret;
  char buffer[4096];
  ssize_t got;
  while ((got = ::read(fd, buffer, sizeof buffer)) > 0 && secret.size() < (1u << 20)) secret.append(buffer, got);
  const int readError = errno;
  ::close(fd);
  if (got < 0) return refuse(std::strerror(readError));
  if (secret.empty()) return refuse("empty");
  return TagKey(std::move(secret));
}

std::string TagKey::tag(std::string_view name, std::string_view bytes) const {
  // The name's length first: no name and bytes run into another pair's.
  const uint64_t size = name.size();
  const std::array<uint8_t, kTagSize> mac =
      hmac(secret_, {std::string_view(reinterpret_cast<const char *>(&size), sizeof size), name, bytes});
  return std::string(reinterpret_cast<const char *>(mac.data()), mac.size());
}

bool TagKey::verifies(std::string_view name, std::string_view bytes, std::string_view tag) const {
  if (tag.size() != kTagSize) return false;
  const std::string expected = this->tag(name, bytes);
  uint8_t difference = 0;  // every byte compared, whatever differs first
  for (size_t i = 0; i < kTagSize; ++i) difference |= static_cast<uint8_t>(expected[i] ^ tag[i]);
  return difference == 0;
}

}  // namespace devdl::store
