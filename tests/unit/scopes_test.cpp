// The scopes imports resolve in (resolve/scopes.h): the global scope in the order images join it,
// a handle's own scope after it, or first with DEEPBIND; only candidates of the importer's family
// satisfy an import. Images are made here, by id, with the names they define.
#include "resolve/scopes.h"
#include "test_support.h"

#include <initializer_list>

namespace devdl::test {
namespace {

// Images by id, each of a format and defining the functions named.
class Images {
 public:
  Images(std::initializer_list<std::pair<ImageFormat, std::vector<std::string_view>>> specs) {
    for (const auto &[format, names] : specs) {
      DeviceImage &image = images_.emplace_back();
      image.format = format;
      for (std::string_view name : names) image.symbols.push_back({name, SymbolKind::Function});
    }
    for (const DeviceImage &image : images_) pointers_.push_back(&image);
  }
  const DeviceImage &operator[](uint32_t id) const { return images_[id]; }
  std::span<const DeviceImage *const> all() const { return pointers_; }
  /// A handle's own scope of images `ids`, in that order.
  LocalScope local(std::initializer_list<uint32_t> ids, bool deepbind = false) const {
    LocalScope scope;
    scope.deepbind = deepbind;
    for (uint32_t id : ids) scope.add(images_[id], id);
    return scope;
  }

 private:
  std::vector<DeviceImage> images_;
  std::vector<const DeviceImage *> pointers_;
};

const auto kEveryImage = [](uint32_t) { return true; };

std::vector<uint32_t> orderOf(const Scopes &scopes) {
  return {scopes.globalOrder().begin(), scopes.globalOrder().end()};
}

TEST(Scopes, ImagesJoinTheGlobalScopeOnceInTheOrderTheyCome) {
  Images images({{ImageFormat::SpirV, {"f"}}, {ImageFormat::SpirV, {"f"}}, {ImageFormat::SpirV, {"g"}}});
  Scopes scopes;
  EXPECT_TRUE(scopes.join(1, images[1]));
  EXPECT_TRUE(scopes.join(0, images[0]));
  EXPECT_FALSE(scopes.join(1, images[1])) << "a second join, as a second RTLD_GLOBAL: no second place";
  EXPECT_EQ(orderOf(scopes), (std::vector<uint32_t>{1, 0}));
  EXPECT_TRUE(scopes.isGlobal(0));
  EXPECT_FALSE(scopes.isGlobal(2));
  EXPECT_EQ(scopes.resolve("f", LinkFamily::Spirv, nullptr, kEveryImage), 1u) << "the first to join";
  EXPECT_EQ(scopes.global().definitions("f").size(), 2u);
  EXPECT_EQ(scopes.resolve("g", LinkFamily::Spirv, nullptr, kEveryImage), std::nullopt) << "not in the global scope";
}

TEST(Scopes, AnImportBindsInTheGlobalScopeFirstThenInTheHandlesOwn) {
  Images images({{ImageFormat::SpirV, {"shared"}}, {ImageFormat::SpirV, {"shared", "own"}}});
  Scopes scopes;
  scopes.join(0, images[0]);
  const LocalScope local = images.local({1});
  EXPECT_EQ(scopes.resolve("shared", LinkFamily::Spirv, &local, kEveryImage), 0u);
  EXPECT_EQ(scopes.resolve("own", LinkFamily::Spirv, &local, kEveryImage), 1u) << "not global: the handle's own";
  EXPECT_EQ(scopes.resolve("own", LinkFamily::Spirv, nullptr, kEveryImage), std::nullopt)
      << "a process image has no scope of its own";
  EXPECT_EQ(scopes.resolve("nowhere", LinkFamily::Spirv, &local, kEveryImage), std::nullopt);
}

TEST(Scopes, DeepbindPutsTheHandlesOwnScopeFirst) {
  Images images({{ImageFormat::SpirV, {"shared", "global"}}, {ImageFormat::SpirV, {"shared"}}});
  Scopes scopes;
  scopes.join(0, images[0]);
  const LocalScope deep = images.local({1}, /*deepbind=*/true);
  EXPECT_EQ(scopes.resolve("shared", LinkFamily::Spirv, &deep, kEveryImage), 1u);
  EXPECT_EQ(scopes.resolve("global", LinkFamily::Spirv, &deep, kEveryImage), 0u) << "then the global scope";
  // The handle's own scope in its order: its image, then its dependencies.
  const LocalScope withDependency = images.local({1, 0}, /*deepbind=*/true);
  EXPECT_EQ(scopes.resolve("shared", LinkFamily::Spirv, &withDependency, kEveryImage), 1u);
}

TEST(Scopes, OnlyCandidatesOfTheImportersFamilySatisfyAnImport) {
  // A cubin first, then two SPIR-V images; the caller takes image 1 for no candidate.
  Images images({{ImageFormat::Cubin, {"f"}}, {ImageFormat::SpirV, {"f"}}, {ImageFormat::SpirV, {"f"}}});
  Scopes scopes;
  for (uint32_t id : {0u, 1u, 2u}) scopes.join(id, images[id]);
  const auto notOne = [](uint32_t id) { return id != 1; };
  EXPECT_EQ(scopes.resolve("f", LinkFamily::Spirv, nullptr, notOne), 2u);
  EXPECT_EQ(scopes.resolve("f", LinkFamily::Cuda, nullptr, notOne), 0u);
  EXPECT_EQ(scopes.resolve("f", LinkFamily::Spirv, nullptr, kEveryImage), 1u);
  EXPECT_EQ(scopes.resolve("f", LinkFamily::Spirv, nullptr, [](uint32_t) { return false; }), std::nullopt);
  // firstCandidate without a family: the first candidate whatever its family.
  const Definition *first = firstCandidate(scopes.global().definitions("f"), notOne);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->image, 0u);
  EXPECT_EQ(first->family, LinkFamily::Cuda);
}

TEST(Scopes, PlacedImagesTakeTheirPositionInSearchOrder) {
  // As DEVDL_PRELOAD's images: joined last, then placed after the first (the executable's).
  Images images({{ImageFormat::SpirV, {"exe"}}, {ImageFormat::SpirV, {"f"}}, {ImageFormat::SpirV, {"f"}},
                 {ImageFormat::SpirV, {"f"}}});
  Scopes scopes;
  for (uint32_t id : {0u, 1u, 2u, 3u}) scopes.join(id, images[id]);
  const uint32_t preloaded[] = {2, 3};
  scopes.place(preloaded, 1, images.all());
  EXPECT_EQ(orderOf(scopes), (std::vector<uint32_t>{0, 2, 3, 1}));
  EXPECT_EQ(scopes.resolve("f", LinkFamily::Spirv, nullptr, kEveryImage), 2u);
  const uint32_t last[] = {2};
  scopes.place(last, 99, images.all());
  EXPECT_EQ(orderOf(scopes), (std::vector<uint32_t>{0, 3, 1, 2})) << "a position past the end is the end";
  EXPECT_EQ(scopes.resolve("f", LinkFamily::Spirv, nullptr, kEveryImage), 3u);
}

TEST(Scopes, ImagesThatLeaveNoLongerDefineAnything) {
  Images images({{ImageFormat::SpirV, {"f"}}, {ImageFormat::SpirV, {"f"}}, {ImageFormat::SpirV, {"g"}}});
  Scopes scopes;
  for (uint32_t id : {0u, 1u, 2u}) scopes.join(id, images[id]);
  const uint32_t first[] = {0};
  scopes.leave(first, images.all());
  EXPECT_EQ(orderOf(scopes), (std::vector<uint32_t>{1, 2}));
  EXPECT_FALSE(scopes.isGlobal(0));
  EXPECT_EQ(scopes.resolve("f", LinkFamily::Spirv, nullptr, kEveryImage), 1u);
  EXPECT_EQ(scopes.global().definitions("f").size(), 1u);
  const uint32_t never[] = {7};
  scopes.leave(never, images.all());
  EXPECT_EQ(orderOf(scopes), (std::vector<uint32_t>{1, 2})) << "an image not in it: nothing changes";
  // Joining again, as a library reopened DEVDL_GLOBAL: at the end.
  EXPECT_TRUE(scopes.join(0, images[0]));
  EXPECT_EQ(orderOf(scopes), (std::vector<uint32_t>{1, 2, 0}));
  EXPECT_EQ(scopes.resolve("f", LinkFamily::Spirv, nullptr, kEveryImage), 1u);
}

TEST(Scopes, AnImageRemovedFromAHandlesScopeNoLongerDefinesInIt) {
  // A host object's image, a handle's recorded dependency, unloaded by the host.
  Images images({{ImageFormat::SpirV, {"own"}}, {ImageFormat::SpirV, {"dependency"}}});
  LocalScope local = images.local({0, 1});
  Scopes scopes;
  EXPECT_EQ(scopes.resolve("dependency", LinkFamily::Spirv, &local, kEveryImage), 1u);
  const uint32_t unloaded[] = {1};
  local.remove(unloaded, images.all());
  EXPECT_EQ(local.images, (std::vector<uint32_t>{0}));
  EXPECT_EQ(scopes.resolve("dependency", LinkFamily::Spirv, &local, kEveryImage), std::nullopt);
  EXPECT_EQ(scopes.resolve("own", LinkFamily::Spirv, &local, kEveryImage), 0u);
}

}  // namespace
}  // namespace devdl::test
