// What a kernel's program takes and what a handle reaches, over the fake backend
// (unit/fake_backend.h): the closure of its imports, each image once; recorded dependencies
// (devdl/module depends) joining a handle's local scope as DT_NEEDED libraries do; dlsym of a
// handle searching what its images bind to; a library's kernel from its importer's program.
#include "unit/loader_fixture.h"

#include "devdl.h"

#include <string>

namespace devdl::test {
namespace {

using LoaderDependencies = LoaderFixture;

TEST_F(LoaderDependencies, AChainLinksEveryLevel) {
  void *base = open("chain_base.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *mid = open("chain_mid.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *top = open("chain_top.spv", DEVDL_NOW);
  EXPECT_EQ(links(), (Links{{"chain_top.spv", "chain_mid.spv", "chain_base.spv"}}));
  EXPECT_EQ(definitionOf(top, "ChainBase"), label("chain_base.spv")) << "reached through chain_mid";
  close(top);
  close(mid);
  close(base);
}

TEST_F(LoaderDependencies, ADiamondLinksTheSharedBaseOnce) {
  void *left = open("diamond_left.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *right = open("diamond_right.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *base = open("diamond_base.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *top = open("diamond_top.spv", DEVDL_NOW);
  EXPECT_EQ(links(), (Links{{"diamond_top.spv", "diamond_left.spv", "diamond_right.spv", "diamond_base.spv"}}));
  close(top);
  close(base);
  close(right);
  close(left);
}

TEST_F(LoaderDependencies, RecordedDependenciesJoinTheLocalScope) {
  // app-depends records that it needs module seedlib (devdl-pack --depends at build time), as
  // DT_NEEDED names a library: lib-module, opened LOCAL, joins app's local scope and stays open
  // while app is.
  const std::string lib = image("lib-module.spv.devdl");
  const std::string app = image("app-depends.spv.devdl");
  EXPECT_EQ(errorText(loader_.open(app.c_str(), DEVDL_LAZY)),
            app + ": image 0 (spirv): depends on module `seedlib`, which no loaded image is");
  EXPECT_EQ(errorText(loader_.open(app.c_str(), DEVDL_LAZY | DEVDL_NOLOAD)), app + ": not loaded (DEVDL_NOLOAD)");
  void *l = openPath(lib, DEVDL_LAZY | DEVDL_LOCAL);
  void *a = openPath(app, DEVDL_NOW);
  ASSERT_TRUE(l && a);
  EXPECT_EQ(links(), (Links{{"app-depends.spv.devdl", "lib-module.spv.devdl"}}));
  EXPECT_EQ(definitionOf(a, "LibDeviceFunc"), lib + ": image 0 (spirv)");
  EXPECT_EQ(definitionOf(l, "AppKernel"), lib + ": undefined device symbol `AppKernel`") << "not the other way";
  // The dependency stays loaded while app is open, whatever its own handle does.
  close(l);
  EXPECT_EQ(openPath(lib, DEVDL_LAZY | DEVDL_NOLOAD), l);
  close(l);
  close(a);
  EXPECT_EQ(errorText(loader_.open(lib.c_str(), DEVDL_LAZY | DEVDL_NOLOAD)), lib + ": not loaded (DEVDL_NOLOAD)")
      << "closed with the last handle needing it";
}

TEST_F(LoaderDependencies, DlsymOfAHandleFindsTheKernelsOfWhatItsImportsBindTo) {
  // As glibc's dlsym(handle) searches the object's dependencies: kernel_app's import binds to
  // kernel_lib, so its handle finds the library's kernel, from the program its own kernel runs in.
  void *lib = open("kernel_lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("kernel_app.spv", DEVDL_LAZY);
  void *library = symbol(app, "LibKernel");
  ASSERT_NE(library, nullptr);
  EXPECT_EQ(links(), (Links{{"kernel_app.spv", "kernel_lib.spv"}}));
  void *user = symbol(app, "UserKernel");
  EXPECT_NE(user, nullptr);
  EXPECT_NE(user, library);
  EXPECT_EQ(symbol(lib, "LibKernel"), library);
  EXPECT_EQ(links().size(), 1u);
  devdl_symbol_info info{};
  info.size = sizeof info;
  ASSERT_FALSE(!!loader_.symbolInfo(app, "LibTwice", info));
  EXPECT_EQ(std::string(info.file), image("kernel_lib.spv"));
  EXPECT_EQ(info.kind, DEVDL_SYMBOL_FUNCTION);
  close(app);
  close(lib);
}

TEST_F(LoaderDependencies, ALibrarysKernelStaysInItsImportersProgramWhenTheImporterCloses) {
  void *lib = open("kernel_lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("kernel_app.spv", DEVDL_NOW);
  void *user = symbol(app, "UserKernel");
  void *library = symbol(lib, "LibKernel");
  EXPECT_NE(user, nullptr);
  EXPECT_EQ(links(), (Links{{"kernel_app.spv", "kernel_lib.spv"}})) << "the library's code is built once";
  close(app);
  EXPECT_EQ(symbol(lib, "LibKernel"), library) << "the program stays for the library's kernel";
  EXPECT_EQ(links().size(), 1u);
  close(lib);
}

TEST_F(LoaderDependencies, AnImporterThatCannotLinkIsLeftOutOfTheLibrarysProgram) {
  void *lib = open("kernel_lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("kernel_app.spv", DEVDL_LAZY);
  // LAZY: its error waits for its own kernel.
  void *broken = open("kernel_app_broken.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  EXPECT_NE(symbol(lib, "LibKernel"), nullptr);  // the library's kernel first
  EXPECT_EQ(links(), (Links{{"kernel_lib.spv", "kernel_app.spv"}}));
  EXPECT_NE(symbol(app, "UserKernel"), nullptr);
  EXPECT_EQ(links().size(), 1u) << "the library's code was built twice";
  EXPECT_EQ(errorText(loader_.symbol(broken, "BrokenKernel")),
            label("kernel_app_broken.spv") + ": undefined device symbol `NowhereDefined`");
  EXPECT_EQ(links().size(), 1u);
  close(broken);
  close(app);
  close(lib);
}

}  // namespace
}  // namespace devdl::test
