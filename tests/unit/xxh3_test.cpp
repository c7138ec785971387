// devdl's XXH3, compiled once per vector width and picked at run time, against xxHash's own
// library: every variant this CPU runs gives the library's hashes, for the sizes where XXH3
// changes its method and for pieces hashed one after another.
#include "support/xxh3.h"

#include <gtest/gtest.h>
#include <xxhash.h>  // the reference: libxxhash

#include <random>
#include <string>
#include <vector>

namespace devdl::test {
namespace {

std::string randomBytes(size_t size) {
  std::mt19937_64 random(size);
  std::string bytes(size, '\0');
  for (char &c : bytes) c = static_cast<char>(random());
  return bytes;
}

// XXH3 hashes 0-16, 17-128, 129-240 bytes and longer inputs each its own way; long ones in
// stripes of 64 and blocks of 1024 bytes.
std::vector<size_t> sizes() {
  std::vector<size_t> all;
  for (size_t n = 0; n <= 260; ++n) all.push_back(n);
  for (size_t n : {1023, 1024, 1025, 4096, 5224, 65543, 800000, 1 << 20}) all.push_back(n);
  return all;
}

TEST(Xxh3, EveryVariantGivesTheLibrarysHashes) {
  const auto variants = xxh3::detail::supportedVariants();
  ASSERT_FALSE(variants.empty());
  EXPECT_EQ(variants.back().name, std::string_view("sse2"));  // every x86-64 runs it
  for (const auto &variant : variants) {
    SCOPED_TRACE(variant.name);
    for (size_t size : sizes()) {
      const std::string bytes = randomBytes(size);
      const XXH128_hash_t expected = XXH3_128bits(bytes.data(), size);
      uint64_t got[2];
      variant.hash128(bytes.data(), size, got);
      ASSERT_EQ(got[0], expected.low64) << size << " bytes";
      ASSERT_EQ(got[1], expected.high64) << size << " bytes";
      const void *data = bytes.data();
      ASSERT_EQ(variant.hash64(&data, &size, 1), XXH3_64bits(bytes.data(), size)) << size << " bytes";
    }
  }
}

TEST(Xxh3, PiecesHashAsTheirConcatenation) {
  const std::string bytes = randomBytes(70000);
  for (const auto &variant : xxh3::detail::supportedVariants()) {
    SCOPED_TRACE(variant.name);
    // Cuts inside and across XXH3's internal buffer (256 bytes) and blocks.
    for (auto [first, second] : {std::pair<size_t, size_t>{0, 0}, {56, 64}, {56, 5224}, {255, 257}, {1024, 69999},
                                 {4000, 70000}}) {
      const void *pieces[] = {bytes.data(), bytes.data() + first, bytes.data() + second};
      const size_t lengths[] = {first, second - first, bytes.size() - second};
      ASSERT_EQ(variant.hash64(pieces, lengths, 3), XXH3_64bits(bytes.data(), bytes.size())) << first << ", " << second;
    }
  }
}

TEST(Xxh3, UsesTheWidestVariantTheCpuRuns) {
  EXPECT_EQ(xxh3::variant(), std::string_view(xxh3::detail::supportedVariants().front().name));
  const std::string bytes = randomBytes(5000);
  const xxh3::Hash128 hash = xxh3::hash128(bytes.data(), bytes.size());
  const XXH128_hash_t expected = XXH3_128bits(bytes.data(), bytes.size());
  EXPECT_EQ(hash.low, expected.low64);
  EXPECT_EQ(hash.high, expected.high64);
  const std::string_view all(bytes);
  EXPECT_EQ(xxh3::hash64({all.substr(0, 64), all.substr(64, 1000), all.substr(1064)}),
            XXH3_64bits(bytes.data(), bytes.size()));
  EXPECT_EQ(xxh3::hash64(bytes.data(), bytes.size()), XXH3_64bits(bytes.data(), bytes.size()));
}

}  // namespace
}  // namespace devdl::test
