// The planner over images made here: candidacy, scopes, virtual-function sets, importers, and
// the errors a plan that cannot be linked gives. No file, no device: each image is its symbols.
#include "resolve/planner.h"
#include "test_support.h"

#include <deque>

namespace devdl::test {
namespace {

// Images by id, each with the names it defines and imports; in the global scope unless put in
// a local scope.
class Images final : public ScopedImages {
 public:
  uint32_t add(std::string label, std::vector<std::string_view> defines, std::vector<std::string_view> imports,
               Candidacy candidacy = Candidacy::Taken, std::string whyNot = "") {
    ScopedImage &image = images_.emplace_back();
    image.image.format = ImageFormat::SpirV;
    for (std::string_view name : defines) image.image.symbols.push_back({name, SymbolKind::Function});
    for (std::string_view name : imports) image.image.symbols.push_back({name, SymbolKind::Import});
    image.label = std::move(label);
    image.file = image.label;
    image.acceptance = {candidacy, std::move(whyNot)};
    const uint32_t id = static_cast<uint32_t>(images_.size() - 1);
    pointers_.push_back(&image.image);
    for (std::string_view name : imports) importers_[std::string(name)].push_back(id);
    return id;
  }
  void global(uint32_t id) { scopes.join(id, images_[id].image); }
  /// A handle's scope: its images, and DEEPBIND where asked.
  LocalScope &local(std::vector<uint32_t> ids, bool deepbind = false) {
    LocalScope &scope = locals_.emplace_back();
    scope.deepbind = deepbind;
    for (uint32_t id : ids) {
      scope.add(images_[id].image, id);
      images_[id].local = &scope;
    }
    return scope;
  }
  ScopedImage &operator[](uint32_t id) { return images_[id]; }

  const ScopedImage &scoped(uint32_t id) const override { return images_[id]; }
  std::span<const DeviceImage *const> pointers() const override { return pointers_; }
  std::span<const uint32_t> importersOf(std::string_view symbol) const override {
    auto it = importers_.find(std::string(symbol));
    return it == importers_.end() ? std::span<const uint32_t>() : std::span<const uint32_t>(it->second);
  }

  Planner planner() const { return Planner(*this, scopes); }
  LinkPlan plan(std::vector<uint32_t> roots) const { return planner().plan(roots); }

  Scopes scopes;

 private:
  std::deque<ScopedImage> images_;  // stable addresses: the pointers and local scopes keep them
  std::vector<const DeviceImage *> pointers_;
  std::deque<LocalScope> locals_;
  std::map<std::string, std::vector<uint32_t>> importers_;
};

std::string errorText(llvm::Error error) { return error ? llvm::toString(std::move(error)) : ""; }

TEST(Planner, AnImportBindsToTheFirstCandidateNotTheFirstDefinition) {
  Images images;
  const uint32_t app = images.add("app", {"k"}, {"f"});
  const uint32_t cubin = images.add("cubin", {"f"}, {}, Candidacy::Refused, "it is for CUDA");
  const uint32_t spirv = images.add("lib", {"f"}, {});
  for (uint32_t id : {app, cubin, spirv}) images.global(id);
  const LinkPlan plan = images.plan({app});
  EXPECT_EQ(plan.images, (std::vector<uint32_t>{app, spirv}));
  EXPECT_TRUE(plan.unresolved.empty());
}

TEST(Planner, AnUndecidedImageSatisfiesNoImport) {
  Images images;
  const uint32_t app = images.add("app", {"k"}, {"f"});
  images.global(app);
  images.global(images.add("lib", {"f"}, {}, Candidacy::Undecided));
  const LinkPlan plan = images.plan({app});
  ASSERT_EQ(plan.unresolved.size(), 1u);
  EXPECT_EQ(plan.unresolved[0].symbol, "f");
}

TEST(Planner, TheUnresolvedErrorSaysWhyTheDefinitionInScopeCannotServe) {
  Images images;
  const uint32_t app = images.add("app.spv: image 0", {"k"}, {"f", "g"});
  images.global(app);
  images.global(images.add("lib.cubin: image 0", {"f"}, {}, Candidacy::Refused, "OpenCL takes no cubin"));
  const std::string text = errorText(images.planner().unresolvedError(images.plan({app})));
  EXPECT_NE(text.find("app.spv: image 0: undefined device symbol `f` (lib.cubin: image 0 defines it, but OpenCL "
                      "takes no cubin)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("undefined device symbol `g`"), std::string::npos) << text;
}

// Bounded: the first few undefined symbols, and how many more (a module of a million imports gave
// an 18 MB error).
TEST(Planner, TheUnresolvedErrorNamesTheFirstFewAndCountsTheRest) {
  Images images;
  std::deque<std::string> names;
  std::vector<std::string_view> imports;
  for (int i = 0; i < 1000; ++i) imports.push_back(names.emplace_back("missing" + std::to_string(i)));
  const uint32_t app = images.add("app.spv: image 0", {"k"}, imports);
  images.global(app);
  const std::string text = errorText(images.planner().unresolvedError(images.plan({app})));
  EXPECT_NE(text.find("undefined device symbol `missing0`"), std::string::npos) << text;
  EXPECT_NE(text.find("undefined device symbol `missing19`"), std::string::npos) << text;
  EXPECT_EQ(text.find("`missing20`"), std::string::npos) << text;
  EXPECT_NE(text.find("\n... and 980 more undefined device symbols"), std::string::npos) << text;
  EXPECT_LT(text.size(), 2000u);
}

TEST(Planner, TheGlobalScopeComesBeforeTheLocalOneUnlessDeepbind) {
  for (bool deepbind : {false, true}) {
    Images images;
    const uint32_t app = images.add("app", {"k"}, {"f"});
    const uint32_t own = images.add("own", {"f"}, {});
    const uint32_t global = images.add("global", {"f"}, {});
    images.global(global);
    images.local({app, own}, deepbind);
    const LinkPlan plan = images.plan({app});
    ASSERT_EQ(plan.bindings.size(), 1u);
    EXPECT_EQ(plan.bindings[0].definer, deepbind ? own : global) << "deepbind " << deepbind;
  }
}

TEST(Planner, ANameBoundToTwoDefinitionsIsAConflictNamingBoth) {
  // DEEPBIND: the root binds `f` in its own scope, the global library it calls binds the global one.
  Images images;
  const uint32_t app = images.add("app", {"k"}, {"f", "g"});
  const uint32_t own = images.add("own", {"f"}, {});
  const uint32_t lib = images.add("lib", {"g"}, {"f"});
  const uint32_t global = images.add("global", {"f"}, {});
  images.global(lib);
  images.global(global);
  images.local({app, own}, /*deepbind=*/true);
  const LinkPlan plan = images.plan({app});
  ASSERT_EQ(plan.conflicts.size(), 1u);
  const std::string text = errorText(images.planner().conflictError(plan));
  EXPECT_NE(text.find("`f` is bound to two definitions in one program: app uses own's, lib uses global's"),
            std::string::npos)
      << text;
}

TEST(Planner, CallingASetPullsInEveryImageOfIt) {
  Images images;
  const uint32_t app = images.add("app", {"k"}, {});
  images[app].vf.calls = {"S"};
  const uint32_t first = images.add("first", {"f1"}, {});
  const uint32_t second = images.add("second", {"f2"}, {});
  const uint32_t other = images.add("other", {"f3"}, {});
  images[first].vf.set = images[second].vf.set = "S";
  images[other].vf.set = "T";
  for (uint32_t id : {app, first, second, other}) images.global(id);
  const LinkPlan plan = images.plan({app});
  EXPECT_EQ(plan.images, (std::vector<uint32_t>{app, first, second}));
  ASSERT_EQ(plan.joined.size(), 2u);
  EXPECT_EQ(plan.joined[0].why, "calls set S");
  EXPECT_TRUE(plan.setProblems.empty());
}

TEST(Planner, CallingASetNoImageHoldsIsAProblemOfThePlan) {
  Images images;
  const uint32_t app = images.add("app", {"k"}, {});
  images[app].vf.calls = {"Missing"};
  images.global(app);
  const LinkPlan plan = images.plan({app});
  ASSERT_EQ(plan.setProblems.size(), 1u);
  EXPECT_EQ(plan.setProblems[0], "app calls virtual functions set Missing, which no image in its scope holds");
  EXPECT_NE(errorText(images.planner().unresolvedError(plan)).find("set Missing"), std::string::npos);
}

TEST(Planner, CreatingObjectsOfASetTakesItsDummyWhereTheRealImageIsRefused) {
  Images images;
  const uint32_t app = images.add("app", {"k"}, {});
  images[app].vf.creates = {"S"};
  const uint32_t real = images.add("real", {"f"}, {}, Candidacy::Refused, "it needs fp64");
  const uint32_t dummy = images.add("dummy", {"f"}, {});
  images[real].vf.set = images[dummy].vf.set = "S";
  images[dummy].vf.dummy = true;
  for (uint32_t id : {app, real, dummy}) images.global(id);
  const LinkPlan plan = images.plan({app});
  EXPECT_EQ(plan.images, (std::vector<uint32_t>{app, dummy}));
  ASSERT_EQ(plan.joined.size(), 1u);
  EXPECT_EQ(plan.joined[0].why, "creates set S: dummy, as real cannot be linked here: it needs fp64");
}

TEST(Planner, ASetsFunctionIsNoDefinitionForAPlanThatNeitherCallsNorCreatesTheSet) {
  Images images;
  const uint32_t app = images.add("app", {"k"}, {"f"});
  const uint32_t member = images.add("member", {"f"}, {});
  images[member].vf.set = "S";
  images.global(app);
  images.global(member);
  const LinkPlan plan = images.plan({app});
  ASSERT_EQ(plan.unresolved.size(), 1u);
  EXPECT_NE(errorText(images.planner().unresolvedError(plan))
                .find("(member defines it, in virtual functions set S, which no image of the program calls or creates)"),
            std::string::npos);
}

TEST(Planner, ImportersAreTheLoadedImagesWhoseImportsBindToThePlanAndResolve) {
  Images images;
  const uint32_t lib = images.add("lib", {"f"}, {});
  const uint32_t app = images.add("app", {"k"}, {"f"});
  const uint32_t broken = images.add("broken", {"k2"}, {"f", "missing"});
  const uint32_t elsewhere = images.add("elsewhere", {"k3"}, {"f"});
  const uint32_t shadow = images.add("shadow", {"f"}, {});
  const uint32_t user = images.add("user", {"k4"}, {"k"});  // imports from an importer: through it
  const uint32_t refused = images.add("refused", {"k5"}, {"f"}, Candidacy::Refused, "not here");
  for (uint32_t id : {lib, app, broken, user, refused}) images.global(id);
  images.local({elsewhere, shadow}, /*deepbind=*/true);  // binds its own `f`
  const LinkPlan plan = images.plan({lib});
  std::vector<uint32_t> found;
  for (const Planner::Importer &importer : images.planner().importersOf(plan, [](uint32_t) { return true; }))
    found.push_back(importer.root);
  std::sort(found.begin(), found.end());
  EXPECT_EQ(found, (std::vector<uint32_t>{app, user}));
  EXPECT_TRUE(images.planner().importersOf(plan, [&](uint32_t id) { return id != app; }).empty())
      << "another device's importer, and what reaches the plan only through it";
}

TEST(Planner, TheTextOfAPlanHasABindingALineAndWhatJoined) {
  Images images;
  const uint32_t app = images.add("app", {"k"}, {"f"});
  images[app].vf.calls = {"S"};
  const uint32_t lib = images.add("lib", {"f"}, {});
  const uint32_t member = images.add("member", {"g"}, {});
  images[member].vf.set = "S";
  for (uint32_t id : {app, lib, member}) images.global(id);
  EXPECT_EQ(images.planner().text(images.plan({app})), "  f (app) -> lib\n  member: calls set S\n");
}

}  // namespace
}  // namespace devdl::test
