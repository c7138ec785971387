// The import closure: chains, diamonds, cycles, missing symbols, first definition wins.
#include "resolve/link_plan.h"
#include "resolve/symbol_index.h"
#include "test_support.h"

namespace devdl::test {
namespace {

// Images named by their index; each defines and imports the names given.
struct Images {
  std::vector<DeviceImage> images;
  std::vector<const DeviceImage *> pointers;
  SymbolIndex index;

  explicit Images(std::vector<std::pair<std::vector<std::string_view>, std::vector<std::string_view>>> specs) {
    images.resize(specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      images[i].format = ImageFormat::SpirV;
      for (auto name : specs[i].first) images[i].symbols.push_back({name, SymbolKind::Function});
      for (auto name : specs[i].second) images[i].symbols.push_back({name, SymbolKind::Import});
    }
    for (uint32_t i = 0; i < images.size(); ++i) {
      pointers.push_back(&images[i]);
      index.add(images[i], i);
    }
  }

  LinkPlan plan(std::vector<uint32_t> roots) {
    return computeLinkPlan(roots, pointers, [&](std::string_view name, uint32_t) -> std::optional<uint32_t> {
      if (const Definition *d = index.find(name, LinkFamily::Spirv)) return d->image;
      return std::nullopt;
    });
  }
};

TEST(LinkPlan, ChainPullsInEachLevel) {
  Images set({{{"k"}, {"a"}}, {{"a"}, {"b"}}, {{"b"}, {"c"}}, {{"c"}, {}}, {{"unused"}, {}}});
  LinkPlan plan = set.plan({0});
  EXPECT_EQ(plan.images, (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_TRUE(plan.unresolved.empty());
  ASSERT_EQ(plan.bindings.size(), 3u);
  EXPECT_EQ(plan.bindings[2].symbol, "c");
  EXPECT_EQ(plan.bindings[2].importer, 2u);
  EXPECT_EQ(plan.bindings[2].definer, 3u);
}

TEST(LinkPlan, DiamondVisitsTheSharedImageOnce) {
  Images set({{{"k"}, {"left", "right"}}, {{"left"}, {"base"}}, {{"right"}, {"base"}}, {{"base"}, {}}});
  LinkPlan plan = set.plan({0});
  EXPECT_EQ(plan.images, (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(plan.bindings.size(), 4u);
}

TEST(LinkPlan, CyclesEnd) {
  Images set({{{"ping"}, {"pong"}}, {{"pong"}, {"ping"}}});
  LinkPlan plan = set.plan({0});
  EXPECT_EQ(plan.images, (std::vector<uint32_t>{0, 1}));
  ASSERT_EQ(plan.bindings.size(), 2u);
  EXPECT_EQ(plan.bindings[1].definer, 0u);
}

TEST(LinkPlan, MissingSymbolIsReportedWithItsImporter) {
  Images set({{{"k"}, {"a"}}, {{"a"}, {"missing"}}});
  LinkPlan plan = set.plan({0});
  ASSERT_EQ(plan.unresolved.size(), 1u);
  EXPECT_EQ(plan.unresolved[0].symbol, "missing");
  EXPECT_EQ(plan.unresolved[0].importer, 1u);
}

// A weak import (a name of SYCL's device libraries) binds where an image defines it, and is left to
// the driver where none does.
TEST(LinkPlan, AWeakImportBindsWhereDefinedAndIsNoErrorWhereNot) {
  Images set({{{"k"}, {}}, {{"__devicelib_expf"}, {}}});
  set.images[0].symbols.push_back({"__devicelib_expf", SymbolKind::Import, /*weak=*/true});
  set.images[0].symbols.push_back({"__devicelib_sinf", SymbolKind::Import, /*weak=*/true});
  LinkPlan plan = set.plan({0});
  EXPECT_EQ(plan.images, (std::vector<uint32_t>{0, 1}));
  ASSERT_EQ(plan.bindings.size(), 1u);
  EXPECT_EQ(plan.bindings[0].symbol, "__devicelib_expf");
  EXPECT_EQ(plan.bindings[0].definer, 1u);
  EXPECT_TRUE(plan.unresolved.empty()) << "__devicelib_sinf is the driver's";
}

TEST(LinkPlan, FirstDefinitionWins) {
  Images set({{{"k"}, {"f"}}, {{"f"}, {}}, {{"f"}, {}}});
  LinkPlan plan = set.plan({0});
  EXPECT_EQ(plan.images, (std::vector<uint32_t>{0, 1}));
}

TEST(LinkPlan, ResolverDecidesTheScope) {
  // A resolver that searches the importer's own image first (DEEPBIND-like).
  Images set({{{"f"}, {}}, {{"k", "f"}, {"f"}}});
  LinkPlan plan = computeLinkPlan(std::vector<uint32_t>{1}, set.pointers,
                                  [](std::string_view, uint32_t importer) -> std::optional<uint32_t> { return importer; });
  EXPECT_EQ(plan.images, std::vector<uint32_t>{1});
  ASSERT_EQ(plan.bindings.size(), 1u);
  EXPECT_EQ(plan.bindings[0].definer, 1u);
}

TEST(LinkPlan, InterposedDefinitionsAreHiddenByImage) {
  // k takes f from image 1 (first) and needs image 2 for g; image 2 defines f too.
  Images set({{{"k"}, {"f", "g"}}, {{"f"}, {}}, {{"f", "g"}, {}}});
  LinkPlan plan = set.plan({0});
  EXPECT_EQ(plan.images, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(plan.interposed, (std::vector<std::vector<std::string_view>>{{}, {}, {"f"}}));
  EXPECT_TRUE(plan.conflicts.empty());
}

TEST(LinkPlan, ANameNobodyImportsKeepsItsFirstDefinition) {
  // h is defined by both libraries and imported by nobody: the first in plan order keeps it.
  Images set({{{"k"}, {"a", "b"}}, {{"a", "h"}, {}}, {{"b", "h"}, {}}});
  LinkPlan plan = set.plan({0});
  EXPECT_EQ(plan.interposed, (std::vector<std::vector<std::string_view>>{{}, {}, {"h"}}));
}

TEST(LinkPlan, ANameBoundToTwoDefinitionsIsAConflict) {
  // The resolver binds image 1's import of f to image 3, and image 0's to image 2 (as DEEPBIND
  // importers in different scopes would).
  Images set({{{"k"}, {"f", "a"}}, {{"a"}, {"f"}}, {{"f"}, {}}, {{"f"}, {}}});
  LinkPlan plan = computeLinkPlan(std::vector<uint32_t>{0}, set.pointers,
                                  [](std::string_view name, uint32_t importer) -> std::optional<uint32_t> {
                                    if (name == "a") return 1;
                                    return importer == 0 ? 2 : 3;
                                  });
  ASSERT_EQ(plan.conflicts.size(), 1u);
  EXPECT_EQ(plan.conflicts[0].symbol, "f");
  EXPECT_EQ(plan.conflicts[0].first.definer, 2u);
  EXPECT_EQ(plan.conflicts[0].second.definer, 3u);
}

}  // namespace
}  // namespace devdl::test
