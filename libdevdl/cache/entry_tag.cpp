#include "cache/entry_tag.h"

#include "support/driver_library.h"
#include "support/error.h"

#if DEVDL_HAVE_OPENSSL
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#endif

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace devdl::cache {

namespace {

#if DEVDL_HAVE_OPENSSL
struct Crypto {
  decltype(&::HMAC) hmac = nullptr;
  decltype(&::EVP_sha256) sha256 = nullptr;
  decltype(&::CRYPTO_memcmp) equal = nullptr;
};

// libcrypto's entry points, opened on first use: a build of devdl runs where it is missing, and a
// key then says why it cannot be used.
const Crypto *crypto(std::string &why) {
  static Crypto api;
  static const std::string problem = [] {
    const EntryPoint entries[] = {{"HMAC", reinterpret_cast<void **>(&api.hmac)},
                                  {"EVP_sha256", reinterpret_cast<void **>(&api.sha256)},
                                  {"CRYPTO_memcmp", reinterpret_cast<void **>(&api.equal)}};
    return openDriverLibrary("libcrypto.so.3", "OpenSSL (Debian: libssl3)", "OpenSSL 3", entries);
  }();
  why = problem;
  return problem.empty() ? &api : nullptr;
}
#else
struct Crypto {
  int (*equal)(const void *, const void *, size_t);
};
const Crypto *crypto(std::string &why) {
  why = "this devdl was built without OpenSSL's headers (Debian: libssl-dev)";
  return nullptr;
}
#endif

// What is tagged: the name's length, the name, the bytes; so that no name and bytes run into
// another pair's.
std::string tagged(std::string_view name, std::string_view bytes) {
  const uint64_t size = name.size();
  std::string data(reinterpret_cast<const char *>(&size), sizeof size);
  data.append(name).append(bytes);
  return data;
}

}  // namespace

llvm::Expected<std::array<uint8_t, kTagSize>> hmacSha256(std::string_view key, std::string_view data) {
  std::string why;
  const Crypto *api = crypto(why);
  if (!api) return fail(ErrorCode::NotFound, why);
#if DEVDL_HAVE_OPENSSL
  std::array<uint8_t, kTagSize> out{};
  unsigned size = 0;
  if (!api->hmac(api->sha256(), key.data(), static_cast<int>(key.size()),
                 reinterpret_cast<const unsigned char *>(data.data()), data.size(), out.data(), &size) ||
      size != kTagSize)
    return fail(ErrorCode::Unsupported, "libcrypto's HMAC-SHA256 failed");
  return out;
#else
  (void)key;
  (void)data;
  return fail(ErrorCode::Unsupported, why);
#endif
}

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
  ::close(fd);
  if (got < 0) return refuse(std::strerror(errno));
  if (secret.empty()) return refuse("empty");
  return TagKey(std::move(secret));
}

llvm::Expected<std::string> TagKey::tag(std::string_view name, std::string_view bytes) const {
  auto mac = hmacSha256(secret_, tagged(name, bytes));
  if (!mac) return mac.takeError();
  return std::string(reinterpret_cast<const char *>(mac->data()), mac->size());
}

bool TagKey::verifies(std::string_view name, std::string_view bytes, std::string_view tag) const {
  std::string why;
  const Crypto *api = crypto(why);
  auto expected = this->tag(name, bytes);
  if (!api || !expected) {
    if (!expected) llvm::consumeError(expected.takeError());
    return false;
  }
  return tag.size() == kTagSize && api->equal(expected->data(), tag.data(), kTagSize) == 0;
}

}  // namespace devdl::cache
