// Needed files (devdl-pack --needed, --runpath) over the fake backend (unit/fake_backend.h), as
// ld.so loads DT_NEEDED libraries: with the handle, breadth first, each once; looked for in the
// needer's run path ($ORIGIN its file's directory), DEVDL_LIBRARY_PATH, then the default
// directory, never the current directory; closed with the handle unless another holds them.
#include "loader/files.h"
#include "unit/loader_fixture.h"

#include "devdl.h"

#include <dlfcn.h>

#include <filesystem>
#include <string>
#include <vector>

namespace devdl::test {
namespace {

class LoaderNeeded : public LoaderFixture {
 protected:
  void TearDown() override {
    if (!before_.empty()) std::filesystem::current_path(before_);
  }
  void enter(const std::string &dir) {
    if (before_.empty()) before_ = std::filesystem::current_path();
    std::filesystem::current_path(dir);
  }
  /// The files of the loaded images, in load order, each once.
  std::vector<std::string> loadedFiles() {
    std::vector<std::string> files;
    for (const Loader::ImageSnapshot &image : loader_.snapshot())
      if (!llvm::is_contained(files, image.file)) files.push_back(image.file);
    return files;
  }

  /// In `dir`: top.devdl (chain_top) needs mid.devdl (chain_mid), which needs base.devdl
  /// (chain_base), each found through $ORIGIN.
  static void writeChain(const std::string &dir) {
    writeNeedingBundle(dir + "/top.devdl", image("chain_top.spv"), "mid.devdl", "$ORIGIN");
    writeNeedingBundle(dir + "/mid.devdl", image("chain_mid.spv"), "base.devdl", "$ORIGIN");
    writeNeedingBundle(dir + "/base.devdl", image("chain_base.spv"), "");
  }

  std::string before_;
};

TEST_F(LoaderNeeded, AnApplicationFindsItsLibraryThroughOriginFromAnotherCurrentDirectory) {
  const std::string dir = scratchDir();
  writeNeedingBundle(dir + "/pkg/app.devdl", image("app.spv"), "lib.devdl", "$ORIGIN/deps");
  writeNeedingBundle(dir + "/pkg/deps/lib.devdl", image("lib.spv"), "");
  std::filesystem::create_directories(dir + "/elsewhere");
  enter(dir);
  void *relative = openPath("pkg/app.devdl", DEVDL_NOW);
  ASSERT_NE(relative, nullptr);
  EXPECT_EQ(links(), (Links{{"app.devdl", "lib.devdl"}}));
  EXPECT_EQ(definitionOf(relative, "LibDeviceFunc"), "pkg/deps/lib.devdl: image 0 (spirv)");
  close(relative);
  EXPECT_TRUE(loadedFiles().empty()) << "the library closed with the application";
  enter(dir + "/elsewhere");
  void *absolute = openPath(dir + "/pkg/app.devdl", DEVDL_NOW);
  ASSERT_NE(absolute, nullptr);
  EXPECT_EQ(definitionOf(absolute, "LibDeviceFunc"), dir + "/pkg/deps/lib.devdl: image 0 (spirv)");
  close(absolute);
}

TEST_F(LoaderNeeded, AChainOfThreeNeededFilesLoadsEveryLevel) {
  const std::string dir = scratchDir();
  writeChain(dir);
  void *top = openPath(dir + "/top.devdl", DEVDL_NOW);
  ASSERT_NE(top, nullptr);
  EXPECT_EQ(loadedFiles(), (std::vector<std::string>{dir + "/top.devdl", dir + "/mid.devdl", dir + "/base.devdl"}));
  EXPECT_EQ(links(), (Links{{"top.devdl", "mid.devdl", "base.devdl"}}));
  EXPECT_EQ(definitionOf(top, "ChainBase"), dir + "/base.devdl: image 0 (spirv)");
  close(top);
  EXPECT_TRUE(loadedFiles().empty());
}

TEST_F(LoaderNeeded, ADiamondOfNeededFilesLoadsTheSharedOneOnce) {
  const std::string dir = scratchDir();
  writeNeedingBundle(dir + "/top.devdl", image("diamond_top.spv"), "left.devdl,right.devdl", "$ORIGIN");
  writeNeedingBundle(dir + "/left.devdl", image("diamond_left.spv"), "base.devdl", "$ORIGIN");
  writeNeedingBundle(dir + "/right.devdl", image("diamond_right.spv"), "base.devdl", "${ORIGIN}");
  writeNeedingBundle(dir + "/base.devdl", image("diamond_base.spv"), "");
  void *top = openPath(dir + "/top.devdl", DEVDL_NOW);
  ASSERT_NE(top, nullptr);
  // Breadth first: what top needs, then what they need.
  EXPECT_EQ(loadedFiles(), (std::vector<std::string>{dir + "/top.devdl", dir + "/left.devdl", dir + "/right.devdl",
                                                     dir + "/base.devdl"}));
  EXPECT_EQ(loader_.snapshot().size(), 4u) << "one image each";
  EXPECT_EQ(links(), (Links{{"top.devdl", "left.devdl", "right.devdl", "base.devdl"}}));
  close(top);
  EXPECT_TRUE(loadedFiles().empty());
}

TEST_F(LoaderNeeded, AMissingNeededFileIsNamedWithItsNeederAndLeavesNothing) {
  const std::string dir = scratchDir();
  writeNeedingBundle(dir + "/pkg/orphan.devdl", image("app.spv"), "nowhere.devdl", "$ORIGIN/deps:/nonexistent");
  EXPECT_EQ(errorText(loader_.open((dir + "/pkg/orphan.devdl").c_str(), DEVDL_LAZY)),
            dir + "/pkg/orphan.devdl needs nowhere.devdl: not found in $ORIGIN/deps (" + dir +
                "/pkg/deps), /nonexistent, " + defaultLibraryDirectory());
  // Deeper: the file that needs it is named, and none of the chain stays loaded.
  writeNeedingBundle(dir + "/top.devdl", image("chain_top.spv"), "pkg/../mid.devdl");
  EXPECT_EQ(errorText(loader_.open((dir + "/top.devdl").c_str(), DEVDL_LAZY)),
            dir + "/top.devdl needs pkg/../mid.devdl: a needed file's name holds no slash (its run path says where it is)");
  writeNeedingBundle(dir + "/top.devdl", image("chain_top.spv"), "mid.devdl", "$ORIGIN");
  writeNeedingBundle(dir + "/mid.devdl", image("chain_mid.spv"), "base.devdl");
  EXPECT_EQ(errorText(loader_.open((dir + "/top.devdl").c_str(), DEVDL_LAZY)),
            dir + "/mid.devdl needs base.devdl: not found in " + defaultLibraryDirectory());
  EXPECT_TRUE(loadedFiles().empty());
}

TEST_F(LoaderNeeded, ANeededNameOnlyInTheCurrentDirectoryIsNotFound) {
  const std::string dir = scratchDir();
  writeNeedingBundle(dir + "/app.devdl", image("app.spv"), "lib.devdl", "relative/dir");
  writeNeedingBundle(dir + "/lib.devdl", image("lib.spv"), "");
  std::filesystem::create_directories(dir + "/relative/dir");
  writeNeedingBundle(dir + "/relative/dir/lib.devdl", image("lib.spv"), "");
  enter(dir);
  EXPECT_EQ(errorText(loader_.open((dir + "/app.devdl").c_str(), DEVDL_LAZY)),
            dir + "/app.devdl needs lib.devdl: not found in relative/dir (not searched: a relative directory: never "
                  "the current directory), " +
                defaultLibraryDirectory());
}

TEST_F(LoaderNeeded, TheRunPathComesBeforeTheLibraryPath) {
  const std::string dir = scratchDir();
  writeNeedingBundle(dir + "/app.devdl", image("app.spv"), "lib.devdl", "$ORIGIN/first");
  writeNeedingBundle(dir + "/first/lib.devdl", image("lib.spv"), "");
  writeNeedingBundle(dir + "/second/lib.devdl", image("lib.spv"), "");
  ScopedVariable path("DEVDL_LIBRARY_PATH", dir + "/second");
  void *app = openPath(dir + "/app.devdl", DEVDL_LAZY);
  ASSERT_NE(app, nullptr);
  EXPECT_EQ(definitionOf(app, "LibDeviceFunc"), dir + "/first/lib.devdl: image 0 (spirv)");
  close(app);
  std::filesystem::remove(dir + "/first/lib.devdl");
  app = openPath(dir + "/app.devdl", DEVDL_LAZY);
  ASSERT_NE(app, nullptr);
  EXPECT_EQ(definitionOf(app, "LibDeviceFunc"), dir + "/second/lib.devdl: image 0 (spirv)");
  close(app);
}

TEST_F(LoaderNeeded, ANeededFileStaysWhileAnotherHandleHoldsIt) {
  const std::string dir = scratchDir();
  writeNeedingBundle(dir + "/app.devdl", image("app.spv"), "lib.devdl", "$ORIGIN");
  writeNeedingBundle(dir + "/lib.devdl", image("lib.spv"), "");
  // Opened first: the application's open takes the same handle.
  void *lib = openPath(dir + "/lib.devdl", DEVDL_LAZY);
  void *app = openPath(dir + "/app.devdl", DEVDL_NOW);
  ASSERT_TRUE(lib && app);
  EXPECT_EQ(loader_.snapshot().size(), 2u);
  close(app);
  EXPECT_EQ(openPath(dir + "/lib.devdl", DEVDL_LAZY | DEVDL_NOLOAD), lib);
  close(lib);
  close(lib);
  EXPECT_TRUE(loadedFiles().empty());
  // Opened after: the library outlives the application that loaded it.
  app = openPath(dir + "/app.devdl", DEVDL_LAZY);
  lib = openPath(dir + "/lib.devdl", DEVDL_LAZY | DEVDL_NOLOAD);
  ASSERT_TRUE(lib && app) << "loaded with the application";
  close(app);
  EXPECT_EQ(loadedFiles(), (std::vector<std::string>{dir + "/lib.devdl"}));
  close(lib);
  EXPECT_TRUE(loadedFiles().empty());
}

TEST_F(LoaderNeeded, GlobalMakesTheNeededFilesGlobalToo) {
  // As RTLD_GLOBAL: the object and its dependencies join the global scope.
  const std::string dir = scratchDir();
  writeChain(dir);
  void *local = openPath(dir + "/top.devdl", DEVDL_LAZY);
  EXPECT_EQ(openError("chain_mid.spv", DEVDL_NOW), label("chain_mid.spv") + ": undefined device symbol `ChainBase`")
      << "base.devdl is in top's local scope only";
  void *global = openPath(dir + "/top.devdl", DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_EQ(global, local);
  void *mid = open("chain_mid.spv", DEVDL_NOW);
  ASSERT_NE(mid, nullptr);
  EXPECT_EQ(definitionOf(mid, "ChainBase"), dir + "/base.devdl: image 0 (spirv)");
  close(mid);
  close(global);
  close(local);
  EXPECT_TRUE(loadedFiles().empty());
}

TEST_F(LoaderNeeded, AFailedGlobalOpenLeavesAFileItNeedsAsItWas) {
  // As glibc's dlopen: an open that fails takes back what it did, the promotion of an object
  // loaded before to the global scope too.
  const std::string dir = scratchDir();
  writeNeedingBundle(dir + "/app.devdl", image("app.spv"), "base.devdl", "$ORIGIN");
  writeNeedingBundle(dir + "/base.devdl", image("chain_base.spv"), "");
  void *base = openPath(dir + "/base.devdl", DEVDL_LAZY);
  ASSERT_NE(base, nullptr);
  auto app = loader_.open((dir + "/app.devdl").c_str(), DEVDL_NOW | DEVDL_GLOBAL);
  EXPECT_EQ(errorText(app), dir + "/app.devdl: image 0 (spirv): undefined device symbol `LibDeviceFunc`");
  EXPECT_EQ(loadedFiles(), (std::vector<std::string>{dir + "/base.devdl"}));
  EXPECT_EQ(openError("chain_mid.spv", DEVDL_NOW), label("chain_mid.spv") + ": undefined device symbol `ChainBase`")
      << "base.devdl is still in no scope but its own handle's";
  close(base);
  EXPECT_TRUE(loadedFiles().empty()) << "one reference, as before the failed open";
}

TEST_F(LoaderNeeded, ACycleOfNeededFilesLoadsEachOnceAndClosesWithTheFirst) {
  const std::string dir = scratchDir();
  writeNeedingBundle(dir + "/a.devdl", image("app.spv"), "b.devdl", "$ORIGIN");
  writeNeedingBundle(dir + "/b.devdl", image("lib.spv"), "a.devdl", "$ORIGIN");
  void *a = openPath(dir + "/a.devdl", DEVDL_NOW);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(loadedFiles(), (std::vector<std::string>{dir + "/a.devdl", dir + "/b.devdl"}));
  close(a);
  EXPECT_TRUE(loadedFiles().empty());
}

TEST_F(LoaderNeeded, APreloadedFileBringsWhatItNeedsIntoTheGlobalScope) {
  // As LD_PRELOAD's objects' DT_NEEDED: global with it.
  const std::string dir = scratchDir();
  writeNeedingBundle(dir + "/preload.devdl", image("chain_mid.spv"), "base.devdl", "$ORIGIN");
  writeNeedingBundle(dir + "/base.devdl", image("chain_base.spv"), "");
  ScopedVariable preload("DEVDL_PRELOAD", dir + "/preload.devdl");
  void *top = open("chain_top.spv", DEVDL_NOW);
  ASSERT_NE(top, nullptr);
  EXPECT_EQ(definitionOf(top, "ChainMid"), dir + "/preload.devdl: image 0 (spirv)");
  // Another image's import of ChainBase finds it in the global scope.
  void *mid = open("chain_mid.spv", DEVDL_NOW);
  ASSERT_NE(mid, nullptr);
  EXPECT_EQ(definitionOf(mid, "ChainBase"), dir + "/base.devdl: image 0 (spirv)");
  close(mid);
  close(top);
}

TEST_F(LoaderNeeded, AHostLibrarysImagesBringTheFilesTheyNeed) {
  // devdl_test_needing carries app.spv, which needs lib.spv from $ORIGIN/images: loaded with the
  // host library, as its DT_NEEDED libraries are; in the global scope while it is; unloaded with it.
  void *host = dlopen(DEVDL_TEST_NEEDING, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(host, nullptr) << dlerror();
  auto global = loader_.open(nullptr, DEVDL_LAZY);
  ASSERT_TRUE(!!global);
  EXPECT_EQ(loadedFiles(), (std::vector<std::string>{DEVDL_TEST_NEEDING, image("lib.spv")}));
  EXPECT_EQ(definitionOf(*global, "LibDeviceFunc"), "the global scope: undefined device symbol `LibDeviceFunc`")
      << "not global while the host library is not";
  ASSERT_EQ(dlopen(DEVDL_TEST_NEEDING, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL), host);
  ASSERT_NE(symbol(*global, "AppKernel"), nullptr);
  EXPECT_EQ(links(), (Links{{"libdevdl_test_needing.so", "lib.spv"}}));
  EXPECT_EQ(definitionOf(*global, "LibDeviceFunc"), image("lib.spv") + ": image 0 (spirv)");
  dlclose(host);
  ASSERT_EQ(dlclose(host), 0);
  EXPECT_TRUE(loadedFiles().empty()) << "unloaded with the host library";
}

TEST_F(LoaderNeeded, AnImageFromMemoryHasNoOrigin) {
  const std::string dir = scratchDir();
  writeNeedingBundle(dir + "/app.devdl", image("app.spv"), "lib.devdl", "$ORIGIN");
  writeNeedingBundle(dir + "/lib.devdl", image("lib.spv"), "");
  const std::string bytes = readFile(dir + "/app.devdl");
  EXPECT_EQ(errorText(loader_.openMemory(bytes.data(), bytes.size(), "app in memory", DEVDL_LAZY)),
            "app in memory needs lib.devdl: not found in $ORIGIN (not searched: no file: opened from memory), " +
                defaultLibraryDirectory());
  ScopedVariable path("DEVDL_LIBRARY_PATH", dir);
  auto app = loader_.openMemory(bytes.data(), bytes.size(), "app in memory", DEVDL_NOW);
  ASSERT_TRUE(!!app) << llvm::toString(app.takeError());
  EXPECT_EQ(definitionOf(*app, "LibDeviceFunc"), dir + "/lib.devdl: image 0 (spirv)");
  close(*app);
}

}  // namespace
}  // namespace devdl::test
