// The loader's scopes over the fake backend (unit/fake_backend.h): the global scope in the order
// images join it, DEVDL_PRELOAD's first; promotion by a second open; a handle's own scope after
// the global one, or first with DEVDL_DEEPBIND. Which images a link gets says where each import
// bound.
#include "unit/loader_fixture.h"

#include "devdl.h"

#include <dlfcn.h>
#include <link.h>

#include <filesystem>
#include <string>
#include <vector>

namespace devdl::test {
namespace {

class LoaderScopes : public LoaderFixture {
 protected:
  void *globalScope() {
    auto global = loader_.open(nullptr, DEVDL_LAZY);
    EXPECT_TRUE(!!global);
    return global ? *global : nullptr;
  }
  /// The loaded images in search order, each as "file global|local format symbols".
  std::vector<std::string> searchOrder() {
    std::vector<std::string> seen;
    for (const Loader::ImageSnapshot &s : loader_.snapshot())
      seen.push_back(std::filesystem::path(s.file).filename().string() + (s.global ? " global " : " local ") +
                     s.format + " " + std::to_string(s.symbols));
    return seen;
  }
};

TEST_F(LoaderScopes, ALocalLibraryIsNotInTheGlobalScopeUntilPromoted) {
  void *lib = open("lib.spv", DEVDL_LAZY | DEVDL_LOCAL);
  EXPECT_EQ(openError("app.spv", DEVDL_NOW), label("app.spv") + ": undefined device symbol `LibDeviceFunc`");
  EXPECT_TRUE(links().empty()) << "nothing is linked for an open that cannot resolve";
  EXPECT_EQ(open("lib.spv", DEVDL_LAZY | DEVDL_GLOBAL), lib) << "promoted, the same handle";
  void *app = open("app.spv", DEVDL_NOW);
  EXPECT_EQ(links(), (Links{{"app.spv", "lib.spv"}}));
  close(app);
  close(lib);
  EXPECT_TRUE(isLoaded("lib.spv")) << "opened twice";
  close(lib);
  EXPECT_FALSE(isLoaded("lib.spv"));
}

TEST_F(LoaderScopes, APromotedLibraryJoinsTheGlobalScopeLast) {
  // As RTLD_GLOBAL on a second dlopen: value_two, opened first but LOCAL, comes after value_one.
  void *two = open("value_two.spv", DEVDL_LAZY);
  void *one = open("value_one.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  EXPECT_EQ(open("value_two.spv", DEVDL_LAZY | DEVDL_GLOBAL), two);
  EXPECT_EQ(searchOrder(), (std::vector<std::string>{"value_one.spv global spirv 1", "value_two.spv global spirv 1"}));
  EXPECT_EQ(definitionOf(globalScope(), "DupValue"), label("value_one.spv"));
  void *user = open("value_user.spv", DEVDL_NOW);
  EXPECT_EQ(links(), (Links{{"value_user.spv", "value_one.spv"}}));
  close(user);
  close(one);
  close(two);
  close(two);
}

// A DEVDL_NOW | DEVDL_GLOBAL open of a handle opened lazily and LOCAL promotes it before it links,
// as a first open with the same flags does (ALibraryAndAnApplicationThatImportFromEachOtherLinkOnce):
// cycle_pong, which imports from cycle_ping, reaches it.
TEST_F(LoaderScopes, APromotionWithNowPromotesBeforeItLinks) {
  void *pong = open("cycle_pong.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *ping = open("cycle_ping.spv", DEVDL_LAZY);
  EXPECT_EQ(open("cycle_ping.spv", DEVDL_NOW | DEVDL_GLOBAL), ping);
  EXPECT_EQ(links(), (Links{{"cycle_ping.spv", "cycle_pong.spv"}}));
  close(ping);
  close(ping);
  close(pong);
}

TEST_F(LoaderScopes, FirstDefinitionInSearchOrderWins) {
  for (auto [first, second] : {std::pair{"value_one.spv", "value_two.spv"}, std::pair{"value_two.spv", "value_one.spv"}}) {
    SCOPED_TRACE(first);
    void *a = open(first, DEVDL_LAZY | DEVDL_GLOBAL);
    void *b = open(second, DEVDL_LAZY | DEVDL_GLOBAL);
    void *user = open("value_user.spv", DEVDL_NOW);
    ASSERT_FALSE(links().empty());
    EXPECT_EQ(links().back(), (std::vector<std::string>{"value_user.spv", first})) << "the second is not needed";
    EXPECT_EQ(definitionOf(user, "DupValue"), label(first)) << "what the handle's kernel binds to";
    close(user);
    close(b);
    close(a);
  }
  EXPECT_EQ(links().size(), 2u);
}

TEST_F(LoaderScopes, TheGlobalScopesHandleSeesTheGlobalImagesAlone) {
  void *lib = open("lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("app.spv", DEVDL_LAZY);
  void *global = globalScope();
  EXPECT_EQ(definitionOf(global, "LibDeviceFunc"), label("lib.spv"));
  EXPECT_EQ(definitionOf(global, "AppKernel"), "the global scope: undefined device symbol `AppKernel`")
      << "app.spv was opened LOCAL";
  EXPECT_EQ(symbol(global, "LibCounter"), symbol(lib, "LibCounter"));
  EXPECT_EQ(links(), (Links{{"lib.spv", "app.spv"}})) << "lib.spv's program, with its loaded importer";
  EXPECT_FALSE(!!loader_.close(global)) << "closing the global scope does nothing";
  EXPECT_EQ(definitionOf(global, "LibDeviceFunc"), label("lib.spv"));
  close(app);
  close(lib);
  EXPECT_EQ(definitionOf(global, "LibDeviceFunc"), "the global scope: undefined device symbol `LibDeviceFunc`");
}

TEST_F(LoaderScopes, TheHandlesOwnScopeComesAfterTheGlobalOneOrFirstWithDeepbind) {
  // A bundle of value_user and value_two (devdl-pack at build time) with value_one in the global
  // scope: DupValue binds to value_one, or with DEEPBIND to the bundle's own value_two.
  const std::string bundle = image("user-with-two.spv.devdl");
  void *one = open("value_one.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *user = openPath(bundle, DEVDL_NOW);
  EXPECT_EQ(links(), (Links{{"user-with-two.spv.devdl", "value_one.spv"}}));
  close(user);
  user = openPath(bundle, DEVDL_NOW | DEVDL_DEEPBIND);
  ASSERT_EQ(links().size(), 2u);
  EXPECT_EQ(fake::links()[1].inputs, (std::vector<std::string>{bundle + ": image 0 (spirv)", bundle + ": image 1 (spirv)"}));
  // As glibc's dlsym(handle): the handle's own images first, DEEPBIND or not.
  EXPECT_EQ(definitionOf(user, "DupValue"), bundle + ": image 1 (spirv)");
  close(user);
  close(one);
}

TEST_F(LoaderScopes, DevdlPreloadComesBeforeTheGlobalLibraries) {
  // Read at the loader's first look at the process; a file that cannot be loaded is said and
  // skipped, as LD_PRELOAD's are.
  ScopedVariable preload("DEVDL_PRELOAD", "/nonexistent/missing.spv:" + image("value_two.spv"));
  testing::internal::CaptureStderr();
  void *one = open("value_one.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "devdl: DEVDL_PRELOAD: /nonexistent/missing.spv: No such file or directory: ignored\n");
  void *user = open("value_user.spv", DEVDL_NOW);
  EXPECT_EQ(links(), (Links{{"value_user.spv", "value_two.spv"}}));
  EXPECT_EQ(searchOrder(), (std::vector<std::string>{"value_two.spv global spirv 1", "value_one.spv global spirv 1",
                                                     "value_user.spv local spirv 2"}));
  // Preloaded for the process's life: an open of its file is its handle, and its close leaves it.
  void *two = open("value_two.spv", DEVDL_LAZY | DEVDL_NOLOAD);
  ASSERT_NE(two, nullptr);
  close(two);
  EXPECT_TRUE(isLoaded("value_two.spv"));
  close(user);
  close(one);
}

TEST_F(LoaderScopes, AHostLibrarysImagesAreGlobalWhileTheHostHasTheLibraryGlobal) {
  // devdl_test_plugin carries app.spv: in the global scope once the host promotes it, out of it
  // once the host unloads it.
  const std::string undefined = "the global scope: undefined device symbol `AppKernel`";
  void *host = dlopen(DEVDL_TEST_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(host, nullptr) << dlerror();
  void *global = globalScope();
  EXPECT_EQ(definitionOf(global, "AppKernel"), undefined) << "RTLD_LOCAL";
  ASSERT_EQ(dlopen(DEVDL_TEST_PLUGIN, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL), host);
  EXPECT_EQ(definitionOf(global, "AppKernel"), std::string(DEVDL_TEST_PLUGIN) + ": image 0 (spirv)");
  dlclose(host);
  ASSERT_EQ(dlclose(host), 0);
  EXPECT_EQ(definitionOf(global, "AppKernel"), undefined) << "unloaded";
}

// A host library unloaded and loaded again RTLD_LOCAL at the same address, with no look of the
// loader's between, is the same find to the process scan (its address and path), and is asked
// again whether it is global: it is not.
TEST_F(LoaderScopes, AHostLibraryReloadedLocalIsNotGlobal) {
  auto baseOf = [](void *host) {
    link_map *map = nullptr;
    return dlinfo(host, RTLD_DI_LINKMAP, &map) == 0 ? map->l_addr : 0;
  };
  void *host = dlopen(DEVDL_TEST_PLUGIN, RTLD_NOW | RTLD_GLOBAL);
  ASSERT_NE(host, nullptr) << dlerror();
  const ElfW(Addr) base = baseOf(host);
  void *global = globalScope();
  EXPECT_EQ(definitionOf(global, "AppKernel"), std::string(DEVDL_TEST_PLUGIN) + ": image 0 (spirv)");
  ASSERT_EQ(dlclose(host), 0);
  host = dlopen(DEVDL_TEST_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(host, nullptr) << dlerror();
  if (baseOf(host) != base) {
    dlclose(host);
    GTEST_SKIP() << "the host loader put the library elsewhere this time";
  }
  EXPECT_EQ(definitionOf(global, "AppKernel"), "the global scope: undefined device symbol `AppKernel`")
      << "RTLD_LOCAL";
  dlclose(host);
}

TEST_F(LoaderScopes, ImagesAreListedInSearchOrderThenTheOthers) {
  void *app = open("app.spv", DEVDL_LAZY);
  void *lib = open("lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  // lib.cl has LibScale too.
  EXPECT_EQ(searchOrder(), (std::vector<std::string>{"lib.spv global spirv 3", "app.spv local spirv 2"}));
  close(lib);
  EXPECT_EQ(searchOrder(), (std::vector<std::string>{"app.spv local spirv 2"}));
  close(app);
  EXPECT_TRUE(searchOrder().empty());
}

}  // namespace
}  // namespace devdl::test
