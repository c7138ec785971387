// Values of a store that others may write (the remote store) carry a tag that only a holder of
// the cluster's shared secret (DEVDL_CACHE_KEY_FILE) could have made: HMAC-SHA256 (RFC 2104, over
// LLVM's SHA-256) of the value's name in the store and its bytes. A value whose tag does not
// verify is a miss: written under another key, changed, or moved from another name.
#pragma once

#include <llvm/Support/Error.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace devdl::store {

inline constexpr size_t kTagSize = 32;

/// HMAC-SHA256 of `data` under `key`.
std::array<uint8_t, kTagSize> hmacSha256(std::string_view key, std::string_view data);

class TagKey {
 public:
  /// The secret in the file `path` (its bytes). An error where the file cannot be read, is not a
  /// regular file, is empty, or its group or others may read or write it (ssh refuses such a key).
  static llvm::Expected<TagKey> fromFile(const std::string &path);
  explicit TagKey(std::string secret) : secret_(std::move(secret)) {}

  /// The tag of the value `bytes` stored under `name`.
  std::string tag(std::string_view name, std::string_view bytes) const;
  /// Whether `tag` is that tag, compared in constant time.
  bool verifies(std::string_view name, std::string_view bytes, std::string_view tag) const;

 private:
  std::string secret_;
};

}  // namespace devdl::store
