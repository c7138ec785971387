// Handles' references over the fake backend (unit/fake_backend.h), as dlopen's: a second open of a
// file is its handle with one more reference, DEVDL_NOLOAD finds a handle without loading one,
// a handle unloads at zero unless DEVDL_NODELETE keeps it, and an unloaded image leaves the
// scopes at once while the programs that use it keep it. Each test has a loader of its own, so
// NODELETE keeps nothing past it.
#include "unit/loader_fixture.h"

#include "devdl.h"

#include <filesystem>
#include <string>

namespace devdl::test {
namespace {

using LoaderReferences = LoaderFixture;

std::string closeError(Loader &loader, void *handle) { return llvm::toString(loader.close(handle)); }

TEST_F(LoaderReferences, ReferenceCountsNoloadAndClose) {
  const std::string path = image("lib.spv");
  EXPECT_EQ(openError("lib.spv", DEVDL_LAZY | DEVDL_NOLOAD), path + ": not loaded (DEVDL_NOLOAD)");
  void *first = open("lib.spv", DEVDL_LAZY);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(open("lib.spv", DEVDL_LAZY), first);
  EXPECT_EQ(open("lib.spv", DEVDL_LAZY | DEVDL_NOLOAD), first);
  close(first);
  close(first);
  EXPECT_EQ(open("lib.spv", DEVDL_LAZY | DEVDL_NOLOAD), first) << "one reference left";
  close(first);
  close(first);
  EXPECT_EQ(closeError(loader_, first), "device_dlclose: invalid handle") << "closed at zero: no longer a handle";
  EXPECT_EQ(openError("lib.spv", DEVDL_LAZY | DEVDL_NOLOAD), path + ": not loaded (DEVDL_NOLOAD)");
}

TEST_F(LoaderReferences, NodeleteKeepsTheHandleAndCountsWithoutWrapping) {
  const std::string path = image("lib.spv");
  void *lib = open("lib.spv", DEVDL_LAZY | DEVDL_NODELETE);
  ASSERT_NE(lib, nullptr);
  close(lib);
  EXPECT_EQ(open("lib.spv", DEVDL_LAZY | DEVDL_NOLOAD), lib) << "NODELETE: still loaded";
  close(lib);
  // No reference is left: one more close is refused, and the count stays at zero.
  EXPECT_EQ(closeError(loader_, lib), "device_dlclose: " + path + " is not open (DEVDL_NODELETE keeps it loaded)");
  EXPECT_EQ(open("lib.spv", DEVDL_LAZY), lib);
  close(lib);
  EXPECT_EQ(closeError(loader_, lib), "device_dlclose: " + path + " is not open (DEVDL_NODELETE keeps it loaded)")
      << "one open, one close: none left";
}

TEST_F(LoaderReferences, NodeleteGivenAtASecondOpenKeepsTheHandle) {
  void *lib = open("lib.spv", DEVDL_LAZY);
  EXPECT_EQ(open("lib.spv", DEVDL_LAZY | DEVDL_NODELETE), lib);
  close(lib);
  close(lib);
  EXPECT_TRUE(isLoaded("lib.spv"));
  EXPECT_EQ(closeError(loader_, lib),
            "device_dlclose: " + image("lib.spv") + " is not open (DEVDL_NODELETE keeps it loaded)");
}

// A DEVDL_NOW | DEVDL_NODELETE open that fails leaves nothing, in the global scope or elsewhere:
// as glibc's, NODELETE takes effect only once the open succeeds.
TEST_F(LoaderReferences, AFailedNowOpenWithNodeleteLeavesNothing) {
  EXPECT_EQ(openError("app.spv", DEVDL_NOW | DEVDL_NODELETE | DEVDL_GLOBAL),
            label("app.spv") + ": undefined device symbol `LibDeviceFunc`");
  EXPECT_FALSE(isLoaded("app.spv"));
  EXPECT_TRUE(loader_.snapshot().empty());
}

TEST_F(LoaderReferences, ANodeleteLibraryClosedStaysInTheGlobalScope) {
  void *lib = open("lib.spv", DEVDL_LAZY | DEVDL_GLOBAL | DEVDL_NODELETE);
  close(lib);
  void *app = open("app.spv", DEVDL_NOW);
  EXPECT_EQ(links(), (Links{{"app.spv", "lib.spv"}}));
  EXPECT_EQ(definitionOf(app, "LibDeviceFunc"), label("lib.spv"));
  close(app);
}

TEST_F(LoaderReferences, TheSameFileByAnotherPathIsTheSameHandle) {
  // A file is its device and inode, as ld.so knows a library: a link to it is the same file.
  const std::string link = scratchDir() + "/lib-link.spv";
  std::filesystem::create_symlink(image("lib.spv"), link);
  void *lib = open("lib.spv", DEVDL_LAZY);
  EXPECT_EQ(openPath(link, DEVDL_LAZY), lib);
  EXPECT_EQ(openPath(std::filesystem::path(image("lib.spv")).parent_path().string() + "/./lib.spv", DEVDL_LAZY), lib);
  close(lib);
  close(lib);
  EXPECT_TRUE(isLoaded("lib.spv")) << "three opens, two closes";
  close(lib);
  EXPECT_FALSE(isLoaded("lib.spv"));
}

TEST_F(LoaderReferences, CallsWithAHandleThatIsNoneAreRefused) {
  int notAHandle = 0;
  EXPECT_EQ(closeError(loader_, &notAHandle), "device_dlclose: invalid handle");
  EXPECT_EQ(errorText(loader_.symbol(&notAHandle, "AppKernel")), "invalid handle");
  EXPECT_EQ(errorText(loader_.planText(&notAHandle, "AppKernel")), "invalid handle");
  EXPECT_EQ(llvm::toString(loader_.specialize(&notAHandle, 3, std::string(4, '\0'))),
            "device_dlspecialize: invalid handle");
  EXPECT_EQ(definitionOf(&notAHandle, "AppKernel"), "invalid handle");
}

// As the host loader keeps a library its dependents use: closing lib.spv while app.spv's program
// uses it leaves the scopes at once (LoaderLinks.ClosingALibraryKeepsItForTheProgramThatUsesIt:
// the program keeps it).
TEST_F(LoaderReferences, AClosedLibraryLeavesTheScopesAtOnce) {
  void *lib = open("lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("app.spv", DEVDL_NOW);
  close(lib);
  EXPECT_FALSE(isLoaded("lib.spv"));
  const std::vector<Loader::ImageSnapshot> listed = loader_.snapshot();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].file, image("app.spv"));
  EXPECT_FALSE(listed[0].global);
  // A new handle does not see it.
  const std::string copy = scratchDir() + "/app-copy.spv";
  std::filesystem::copy_file(image("app.spv"), copy);
  EXPECT_EQ(errorText(loader_.open(copy.c_str(), DEVDL_NOW)),
            copy + ": image 0 (spirv): undefined device symbol `LibDeviceFunc`");
  EXPECT_EQ(definitionOf(app, "LibDeviceFunc"), label("lib.spv")) << "what app's program binds to";
  EXPECT_EQ(links().size(), 1u);
  close(app);
}

}  // namespace
}  // namespace devdl::test
