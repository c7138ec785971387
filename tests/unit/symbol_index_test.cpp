// Resolution over a list of images (devdl-pack --check): unresolved imports, duplicates, and
// formats that never link with each other.
#include "image/read_image.h"
#include "resolve/symbol_index.h"
#include "test_support.h"

namespace devdl::test {
namespace {

DeviceImage imageOf(ImageFormat format, std::vector<Symbol> symbols) {
  DeviceImage image;
  image.format = format;
  image.symbols = std::move(symbols);
  return image;
}

TEST(CheckLinks, SeedExampleResolvesAndFailsWithoutTheLibrary) {
  auto lib = readImageFile(image("lib.spv"));
  auto app = readImageFile(image("app.spv"));
  ASSERT_TRUE(!!lib && !!app);
  const DeviceImage *both[] = {&app->images[0], &lib->images[0]};
  LinkCheck ok = checkLinks(both);
  EXPECT_TRUE(ok.unresolved.empty());
  EXPECT_TRUE(ok.duplicates.empty());

  const DeviceImage *alone[] = {&app->images[0]};
  LinkCheck missing = checkLinks(alone);
  ASSERT_EQ(missing.unresolved.size(), 1u);
  EXPECT_EQ(missing.unresolved[0].symbol, "LibDeviceFunc");
  EXPECT_EQ(missing.unresolved[0].image, 0u);
}

TEST(CheckLinks, FirstDefinitionWinsAndLaterOnesAreReported) {
  DeviceImage a = imageOf(ImageFormat::SpirV, {{"f", SymbolKind::Function}, {"g", SymbolKind::Import}});
  DeviceImage b = imageOf(ImageFormat::SpirV, {{"g", SymbolKind::Function}, {"f", SymbolKind::Function}});
  DeviceImage c = imageOf(ImageFormat::SpirV, {{"f", SymbolKind::Function}});
  const DeviceImage *images[] = {&a, &b, &c};
  LinkCheck check = checkLinks(images);
  EXPECT_TRUE(check.unresolved.empty());
  ASSERT_EQ(check.duplicates.size(), 2u);
  for (const auto &d : check.duplicates) {
    EXPECT_EQ(d.symbol, "f");
    EXPECT_EQ(d.first, 0u);
  }
  EXPECT_EQ(check.duplicates[0].second, 1u);
  EXPECT_EQ(check.duplicates[1].second, 2u);

  SymbolIndex index;
  for (uint32_t i = 0; i < 3; ++i) index.add(*images[i], i);
  ASSERT_NE(index.find("f", LinkFamily::Spirv), nullptr);
  EXPECT_EQ(index.find("f", LinkFamily::Spirv)->image, 0u);
  EXPECT_EQ(index.definitions("f").size(), 3u);
  EXPECT_EQ(index.find("g", LinkFamily::Spirv)->image, 1u);
}

TEST(CheckLinks, FormatsOfDifferentFamiliesNeverResolveEachOther) {
  DeviceImage cuda = imageOf(ImageFormat::Cubin, {{"LibDeviceFunc", SymbolKind::Function}});
  DeviceImage ptx = imageOf(ImageFormat::Ptx, {{"LibDeviceFunc", SymbolKind::Import}});
  DeviceImage spirv = imageOf(ImageFormat::SpirV, {{"LibDeviceFunc", SymbolKind::Import}});
  const DeviceImage *images[] = {&cuda, &spirv, &ptx};
  LinkCheck check = checkLinks(images);
  ASSERT_EQ(check.unresolved.size(), 1u);
  EXPECT_EQ(check.unresolved[0].image, 1u) << "the SPIR-V import is not met by a cubin";
}

}  // namespace
}  // namespace devdl::test
