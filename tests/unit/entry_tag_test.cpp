// The remote store's tags (store/entry_tag.h): HMAC-SHA256 as RFC 4231 gives its results, a tag
// bound to the secret, the value's name and its bytes, and key files refused as ssh refuses keys.
#include "store/entry_tag.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <llvm/ADT/StringExtras.h>

#include <sys/stat.h>

#include <filesystem>

namespace devdl {
namespace {

using store::TagKey;

std::string hex(const std::array<uint8_t, store::kTagSize> &bytes) {
  return llvm::toHex(llvm::ArrayRef<uint8_t>(bytes.data(), bytes.size()), /*LowerCase=*/true);
}

TEST(EntryTag, HmacSha256IsRfc4231s) {
  // RFC 4231, test cases 1 and 2.
  EXPECT_EQ(hex(store::hmacSha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hex(store::hmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Test case 6: a key longer than SHA-256's block is hashed first.
  EXPECT_EQ(hex(store::hmacSha256(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(EntryTag, ATagIsOfTheSecretTheNameAndTheBytes) {
  const TagKey key("the cluster's secret"), other("another secret");
  const std::string tag = key.tag("devdl:0123", "the entry");
  EXPECT_EQ(tag.size(), store::kTagSize);
  EXPECT_TRUE(key.verifies("devdl:0123", "the entry", tag));
  EXPECT_FALSE(other.verifies("devdl:0123", "the entry", tag)) << "another key";
  EXPECT_FALSE(key.verifies("devdl:4567", "the entry", tag)) << "another name: a value moved";
  EXPECT_FALSE(key.verifies("devdl:0123", "the entrY", tag)) << "other bytes";
  EXPECT_FALSE(key.verifies("devdl:0123", "the entry", tag.substr(1))) << "a tag cut short";
  // The name's length is tagged: a name and bytes never run into another pair's.
  EXPECT_FALSE(key.verifies("devdl:012", "3the entry", tag));
}

TEST(EntryTag, AKeyFileOthersMayReadIsRefused) {
  const std::string dir = test::scratchDir();
  const std::string path = dir + "/key";
  test::writeFile(path, "s3cret bytes");
  chmod(path.c_str(), 0600);
  auto key = TagKey::fromFile(path);
  ASSERT_TRUE(!!key) << llvm::toString(key.takeError());
  EXPECT_TRUE(key->verifies("n", "v", TagKey("s3cret bytes").tag("n", "v"))) << "its bytes are the secret";
  for (mode_t mode : {0640, 0604, 0660, 0602}) {
    chmod(path.c_str(), mode);
    EXPECT_EQ(test::errorText(TagKey::fromFile(path)),
              "DEVDL_CACHE_KEY_FILE=" + path + ": its group or others may read or write it (chmod 600 it)")
        << std::oct << mode;
  }
  test::writeFile(path, "");
  chmod(path.c_str(), 0600);
  EXPECT_EQ(test::errorText(TagKey::fromFile(path)), "DEVDL_CACHE_KEY_FILE=" + path + ": empty");
  EXPECT_EQ(test::errorText(TagKey::fromFile(dir + "/none")),
            "DEVDL_CACHE_KEY_FILE=" + dir + "/none: No such file or directory");
  std::filesystem::create_directory(dir + "/directory");
  chmod((dir + "/directory").c_str(), 0700);
  EXPECT_EQ(test::errorText(TagKey::fromFile(dir + "/directory")),
            "DEVDL_CACHE_KEY_FILE=" + dir + "/directory: not a regular file");
}

}  // namespace
}  // namespace devdl
