// The loader over the fake backend (unit/fake_backend.h): how many links it asks for, and of
// what. Real SPIR-V images, real scopes and program cache; only the device is a double.
#include "unit/loader_fixture.h"

#include "devdl.h"

#include <filesystem>

namespace devdl::test {
namespace {

using LoaderLinks = LoaderFixture;

TEST_F(LoaderLinks, ALibraryAndAnApplicationThatImportFromEachOtherLinkOnce) {
  void *pong = open("cycle_pong.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *ping = open("cycle_ping.spv", DEVDL_NOW | DEVDL_GLOBAL);
  EXPECT_EQ(links(), (Links{{"cycle_ping.spv", "cycle_pong.spv"}}));
  EXPECT_NE(symbol(ping, "CycleKernel"), nullptr);
  EXPECT_EQ(links().size(), 1u) << "the kernel was linked at the open";
  close(ping);
  close(pong);
}

TEST_F(LoaderLinks, TheSecondKernelOfAProgramLinksZeroTimes) {
  void *lib = open("kernel_lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("kernel_app.spv", DEVDL_LAZY);
  void *user = symbol(app, "UserKernel");
  EXPECT_EQ(links(), (Links{{"kernel_app.spv", "kernel_lib.spv"}}));
  void *library = symbol(lib, "LibKernel");
  EXPECT_NE(library, nullptr);
  EXPECT_NE(library, user);
  EXPECT_EQ(symbol(app, "UserKernel"), user);
  EXPECT_EQ(links().size(), 1u) << "the library's kernel is in the application's program";
  close(app);
  close(lib);
}

TEST_F(LoaderLinks, ALibrarysKernelFirstLinksItsLoadedImportersWithIt) {
  void *lib = open("kernel_lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("kernel_app.spv", DEVDL_LAZY);
  EXPECT_NE(symbol(lib, "LibKernel"), nullptr);
  EXPECT_EQ(links(), (Links{{"kernel_lib.spv", "kernel_app.spv"}}));
  EXPECT_NE(symbol(app, "UserKernel"), nullptr);
  EXPECT_EQ(links().size(), 1u) << "the application's kernel is in the library's program";
  close(app);
  close(lib);
}

TEST_F(LoaderLinks, ClosingAndReopeningLinksAgain) {
  void *lib = open("kernel_lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("kernel_app.spv", DEVDL_NOW);
  EXPECT_EQ(links().size(), 1u);
  close(app);
  app = open("kernel_app.spv", DEVDL_NOW);
  EXPECT_NE(symbol(app, "UserKernel"), nullptr);
  EXPECT_EQ(links(), (Links{{"kernel_app.spv", "kernel_lib.spv"}, {"kernel_app.spv", "kernel_lib.spv"}}));
  close(app);
  close(lib);
}

// Unless the program holds the instance of the library's variables, which lives while the library
// is loaded (loader_instances_test.cpp): then it serves the application again.
TEST_F(LoaderLinks, ClosingAndReopeningAnApplicationKeepsTheLibrarysInstance) {
  void *lib = open("lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("app.spv", DEVDL_NOW);
  void *counter = symbol(lib, "LibCounter");
  close(app);
  app = open("app.spv", DEVDL_NOW);
  EXPECT_NE(symbol(app, "AppKernel"), nullptr);
  EXPECT_EQ(links(), (Links{{"app.spv", "lib.spv"}}));
  EXPECT_EQ(symbol(app, "LibCounter"), counter);
  close(app);
  close(lib);
}

TEST_F(LoaderLinks, TheSameCodeFromAnotherFileLinksOnce) {
  const std::string copy = scratchDir() + "/app-copy.spv";
  std::filesystem::copy_file(image("app.spv"), copy);
  void *lib = open("lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("app.spv", DEVDL_NOW);
  auto again = loader_.open(copy.c_str(), DEVDL_NOW);
  ASSERT_TRUE(!!again) << llvm::toString(again.takeError());
  EXPECT_NE(*again, app);
  EXPECT_EQ(symbol(*again, "AppKernel"), symbol(app, "AppKernel"));
  EXPECT_EQ(links().size(), 1u);
  close(*again);
  close(app);
  close(lib);
}

TEST_F(LoaderLinks, DlsymOfAHandleSearchesWhatItsImagesDependOn) {
  // As glibc's dlsym(handle): app.spv's own images, then lib.spv, which its import binds to.
  void *lib = open("lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("app.spv", DEVDL_LAZY);
  void *counter = symbol(app, "LibCounter");
  ASSERT_NE(counter, nullptr);
  EXPECT_EQ(links(), (Links{{"app.spv", "lib.spv"}})) << "the program app.spv's kernels use";
  EXPECT_NE(symbol(app, "AppKernel"), nullptr);
  EXPECT_EQ(links().size(), 1u);
  EXPECT_EQ(symbol(lib, "LibCounter"), counter) << "one instance: the one the kernels use";
  EXPECT_NE(symbol(app, "LibDeviceFunc"), nullptr);
  devdl_symbol_info info{};
  info.size = sizeof info;
  ASSERT_FALSE(!!loader_.symbolInfo(app, "LibDeviceFunc", info));
  EXPECT_EQ(std::string(info.file), image("lib.spv"));
  // A library the handle's imports do not bind to is not searched.
  void *other = open("value_one.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  auto missing = loader_.symbol(app, "DupValue");
  ASSERT_FALSE(!!missing);
  EXPECT_EQ(llvm::toString(missing.takeError()), image("app.spv") + ": undefined device symbol `DupValue`");
  close(other);
  close(app);
  close(lib);
}

TEST_F(LoaderLinks, ClosingALibraryKeepsItForTheProgramThatUsesIt) {
  void *lib = open("lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("app.spv", DEVDL_NOW);
  void *kernel = symbol(app, "AppKernel");
  void *counter = symbol(app, "LibCounter");
  close(lib);
  EXPECT_EQ(symbol(app, "AppKernel"), kernel);
  EXPECT_EQ(symbol(app, "LibCounter"), counter) << "app's program still binds to lib.spv";
  EXPECT_EQ(links().size(), 1u) << "nothing linked again";
  // The plan and what a name is say what the kernel runs: lib.spv's code, closed or not.
  auto plan = loader_.planText(app, "AppKernel");
  ASSERT_TRUE(!!plan) << llvm::toString(plan.takeError());
  const std::string appLabel = image("app.spv") + ": image 0 (spirv)", libLabel = image("lib.spv") + ": image 0 (spirv)";
  EXPECT_EQ(*plan, "AppKernel: " + appLabel + "\n  LibDeviceFunc (" + appLabel + ") -> " + libLabel + "\n");
  devdl_symbol_info info{};
  info.size = sizeof info;
  ASSERT_FALSE(!!loader_.symbolInfo(app, "LibDeviceFunc", info));
  EXPECT_EQ(std::string(info.file), image("lib.spv"));
  // Reopened, the library is a new handle in the scopes, its code still app's program's; its
  // variables have a new instance (the last reference to the old one was closed), linked for it.
  lib = open("lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *reopened = symbol(lib, "LibCounter");
  EXPECT_NE(reopened, counter);
  EXPECT_EQ(links().size(), 2u);
  EXPECT_EQ(symbol(app, "LibCounter"), counter) << "app's program still binds to the lib.spv it was linked with";
  close(app);
  close(lib);
}

TEST_F(LoaderLinks, InterpositionIsBySymbol) {
  // app takes Answer from interpose_first (first in search order) and needs interpose_other for
  // Other: the link sees interpose_other's own Answer as local to it.
  void *first = open("interpose_first.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *other = open("interpose_other.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("interpose_app.spv", DEVDL_NOW);
  EXPECT_NE(symbol(app, "InterposeKernel"), nullptr);
  ASSERT_EQ(links(), (Links{{"interpose_app.spv", "interpose_first.spv", "interpose_other.spv"}}));
  EXPECT_EQ(fake::links()[0].interposed, (std::vector<std::vector<std::string>>{{}, {}, {"Answer"}}));
  close(app);
  // In the other order, interpose_other's Answer is the one used, and interpose_first is not needed.
  close(first);
  first = open("interpose_first.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  app = open("interpose_app.spv", DEVDL_NOW);
  EXPECT_EQ(links().back(), (std::vector<std::string>{"interpose_app.spv", "interpose_other.spv"}));
  EXPECT_EQ(fake::links().back().interposed, (std::vector<std::vector<std::string>>{{}, {}}));
  close(app);
  close(first);
  close(other);
}

TEST(LoaderBackends, AFamilyGoesToTheFirstBackendThatTakesItAndHasADevice) {
  // Two rows take SPIR-V; the first has no device: the second links, found by capability. With
  // DEVDL_BACKEND naming the first, SPIR-V has no device, and the reason is the first's.
  auto noStore = []() -> store::BinaryStore & {
    static store::DiskCache none("", 0);
    return none;
  };
  {
    std::lock_guard lock(fake::linksMutex());
    fake::links().clear();
  }
  Loader either({fake::backendsWithAnAbsentOneFirst(), noStore, ""});
  ASSERT_TRUE(!!either.open(image("lib.spv").c_str(), DEVDL_LAZY | DEVDL_GLOBAL));
  auto app = either.open(image("app.spv").c_str(), DEVDL_NOW);
  ASSERT_TRUE(!!app) << llvm::toString(app.takeError());
  EXPECT_EQ(fake::links().size(), 1u);
  devdl_native native{};
  native.size = sizeof native;
  ASSERT_FALSE(!!either.native(native));
  EXPECT_EQ(native.backend, fake::kBackendNumber) << "the default: the first backend with a device";

  Loader absent({fake::backendsWithAnAbsentOneFirst(), noStore, "absent"});
  auto refused = absent.open(image("app.spv").c_str(), DEVDL_NOW);
  ASSERT_FALSE(!!refused);
  EXPECT_EQ(llvm::toString(refused.takeError()),
            image("app.spv") + ": image 0 (spirv): undefined device symbol `LibDeviceFunc`");
  auto lib = absent.open(image("lib.spv").c_str(), DEVDL_LAZY);
  ASSERT_TRUE(!!lib);
  auto variable = absent.symbol(*lib, "LibCounter");
  ASSERT_FALSE(!!variable);
  EXPECT_EQ(llvm::toString(variable.takeError()),
            image("lib.spv") + ": image 0 (spirv): `LibCounter` is in a spirv image, which cannot be linked here: "
                               "no absent device here");
}

}  // namespace
}  // namespace devdl::test
