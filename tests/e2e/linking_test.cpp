// The end-to-end suite (e2e/dlopen_fixture.h): images linked across handles and computing on the
// device as their imports bind: chains, diamonds, cycles, the first definition in search order,
// interposition by symbol, DEEPBIND, recorded dependencies, LD_PRELOAD and DEVDL_PRELOAD.
#include "e2e/dlopen_fixture.h"

#include <cstdlib>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace devdl::test {
namespace {

TEST_F(DeviceDlopen, ChainOfImages) {
  auto libs = openAll({"chain_base", "chain_mid"}, DEVDL_LAZY | DEVDL_GLOBAL);
  void *top = device_dlopen(deviceImage("chain_top").c_str(), DEVDL_NOW);
  ASSERT_NE(top, nullptr) << error();
  void *kernel = device_dlsym(top, "ChainKernel");
  ASSERT_NE(kernel, nullptr) << error();
  EXPECT_EQ(run(kernel, 4), (std::vector<int>{7, 9, 11, 13}));  // (i + 3) * 2 + 1
  device_dlclose(top);
  closeAll(libs);
}

// Libraries whose SPIR-V is valid but for the layout of its blocks, as clang-15 -O1 and
// llvm-spirv-15 write loops (loop_lib.cl: a block before its dominator; loop_nested_lib.cl: two
// loops of one merge block): linked and run, as loose files and from a bundle whose recorded
// symbols let them through unread until the link (which then takes them as the reader leaves them).
TEST_F(DeviceDlopen, LibrariesOfBlocksOutOfOrderLinkAndRun) {
  const std::string bundle = scratchDir() + "/loops.devdl";
  CommandResult packed = devdl::test::run({DEVDL_PACK, "-o", bundle, deviceImage("loop_lib"), deviceImage("loop_nested_lib")});
  ASSERT_EQ(packed.status, 0) << packed.err;
  for (bool bundled : {false, true}) {
    SCOPED_TRACE(bundled ? "bundled" : "loose");
    std::vector<void *> libs = bundled ? std::vector<void *>{device_dlopen(bundle.c_str(), DEVDL_LAZY | DEVDL_GLOBAL)}
                                       : openAll({"loop_lib", "loop_nested_lib"}, DEVDL_LAZY | DEVDL_GLOBAL);
    ASSERT_NE(libs.front(), nullptr) << error();
    void *app = device_dlopen(deviceImage("loop_app").c_str(), DEVDL_NOW);
    ASSERT_NE(app, nullptr) << error();
    void *kernel = device_dlsym(app, "LoopKernel");
    ASSERT_NE(kernel, nullptr) << error();
    // 100 * (3i, odd values cleared) + where i + 1 is in the grid
    EXPECT_EQ(run(kernel, 4), (std::vector<int>{9, 3, 611, 6}));
    device_dlclose(app);
    closeAll(libs);
  }
}

TEST_F(DeviceDlopen, DiamondLinksTheSharedBaseOnce) {
  auto libs = openAll({"diamond_left", "diamond_right", "diamond_base"}, DEVDL_LAZY | DEVDL_GLOBAL);
  void *top = device_dlopen(deviceImage("diamond_top").c_str(), DEVDL_NOW);
  ASSERT_NE(top, nullptr) << error();
  void *kernel = device_dlsym(top, "DiamondKernel");
  ASSERT_NE(kernel, nullptr) << error();
  EXPECT_EQ(run(kernel, 4), (std::vector<int>{3, 23, 43, 63}));  // 10i + 1 + 10i + 2
  device_dlclose(top);
  closeAll(libs);
}

TEST_F(DeviceDlopen, ImagesThatImportFromEachOther) {
  auto pong = openAll({"cycle_pong"}, DEVDL_LAZY | DEVDL_GLOBAL);
  void *ping = device_dlopen(deviceImage("cycle_ping").c_str(), DEVDL_NOW | DEVDL_GLOBAL);
  ASSERT_NE(ping, nullptr) << error();
  void *kernel = device_dlsym(ping, "CycleKernel");
  ASSERT_NE(kernel, nullptr) << error();
  EXPECT_EQ(run(kernel, 4), (std::vector<int>{1, 4, 7, 10}));  // 3i + 1
  device_dlclose(ping);
  closeAll(pong);
}

TEST_F(DeviceDlopen, FirstDefinitionInSearchOrderWins) {
  for (auto [first, second, expected] : {std::tuple{"value_one", "value_two", 1},
                                         std::tuple{"value_two", "value_one", 2}}) {
    auto libs = openAll({first, second}, DEVDL_LAZY | DEVDL_GLOBAL);
    void *user = device_dlopen(deviceImage("value_user").c_str(), DEVDL_NOW);
    ASSERT_NE(user, nullptr) << error();
    void *kernel = device_dlsym(user, "ValueKernel");
    ASSERT_NE(kernel, nullptr) << error();
    EXPECT_EQ(run(kernel, 2), (std::vector<int>{expected, expected})) << first << " first";
    device_dlclose(user);
    closeAll(libs);
  }
}

// Interposition by symbol, as ld.so: interpose_app takes Answer from interpose_first, first in
// search order, and needs interpose_other for Other; interpose_other defines Answer too, and the
// link sees it local to interpose_other (it failed: two definitions of Answer).
TEST_F(DeviceDlopen, InterpositionIsBySymbolNotByImage) {
  auto libs = openAll({"interpose_first", "interpose_other"}, DEVDL_LAZY | DEVDL_GLOBAL);
  if (onOpenCl()) {  // devdl_cache_probe launches through OpenCL
    setenv("DEVDL_DEBUG", "bindings", 1);
    CommandResult traced = devdl::test::run({DEVDL_TEST_CACHE_PROBE, "1", "InterposeKernel",
                                             deviceImage("interpose_first"), deviceImage("interpose_other"),
                                             deviceImage("interpose_app")});
    unsetenv("DEVDL_DEBUG");
    EXPECT_EQ(traced.out, "210 211 212 213 214 215 216 217\n") << traced.err;
    EXPECT_NE(traced.err.find("devdl: interposed `Answer`: made local in " + where("interpose_other")),
              std::string::npos)
        << traced.err;
  }
  void *app = device_dlopen(deviceImage("interpose_app").c_str(), DEVDL_NOW);
  ASSERT_NE(app, nullptr) << error();
  EXPECT_EQ(run(device_dlsym(app, "InterposeKernel"), 4), (std::vector<int>{210, 211, 212, 213}));
  device_dlclose(app);
  closeAll(libs);
}

TEST_F(DeviceDlopen, DeepbindPrefersTheHandlesOwnDefinition) {
  // A bundle holding the user and value_two (made by devdl-pack at build time): with DEEPBIND
  // its own DupValue wins over the global value_one.
  const std::string bundle = image("user-with-two" + extension_ + ".devdl");
  auto one = openAll({"value_one"}, DEVDL_LAZY | DEVDL_GLOBAL);
  for (auto [flags, expected] : {std::pair{DEVDL_NOW, 1}, std::pair{DEVDL_NOW | DEVDL_DEEPBIND, 2}}) {
    void *user = device_dlopen(bundle.c_str(), flags);
    ASSERT_NE(user, nullptr) << error();
    void *kernel = device_dlsym(user, "ValueKernel");
    ASSERT_NE(kernel, nullptr) << error();
    EXPECT_EQ(run(kernel, 1), std::vector<int>{expected}) << "flags " << flags;
    device_dlclose(user);
  }
  closeAll(one);
}

TEST_F(DeviceDlopen, RecordedDependenciesJoinTheLocalScope) {
  // app-depends records that it needs module seedlib (devdl-pack --depends at build time), as
  // DT_NEEDED names a library: lib-module, opened LOCAL, joins app's local scope and stays open
  // while app is.
  const std::string lib = image("lib-module" + extension_ + ".devdl");
  const std::string app = image("app-depends" + extension_ + ".devdl");
  EXPECT_EQ(device_dlopen(app.c_str(), DEVDL_LAZY), nullptr);
  EXPECT_EQ(error(), app + ": image 0 (" + imageWords_ + "): depends on module `seedlib`, which no loaded image is");
  void *l = device_dlopen(lib.c_str(), DEVDL_LAZY | DEVDL_LOCAL);
  ASSERT_NE(l, nullptr) << error();
  void *a = device_dlopen(app.c_str(), DEVDL_NOW);
  ASSERT_NE(a, nullptr) << error();
  EXPECT_EQ(run(device_dlsym(a, "AppKernel"), 4), (std::vector<int>{0, 2, 4, 6}));
  devdl_symbol_info info{};
  info.size = sizeof info;
  ASSERT_EQ(device_dlsyminfo(a, "LibDeviceFunc", &info), 0) << error();
  EXPECT_EQ(std::string(info.file), lib);
  // The dependency stays loaded while app is open, whatever its own handle does.
  EXPECT_EQ(device_dlclose(l), 0);
  EXPECT_EQ(device_dlopen(lib.c_str(), DEVDL_LAZY | DEVDL_NOLOAD), l);
  EXPECT_EQ(device_dlclose(l), 0);
  EXPECT_EQ(device_dlclose(a), 0);
  EXPECT_EQ(device_dlopen(lib.c_str(), DEVDL_LAZY | DEVDL_NOLOAD), nullptr) << "closed with the last handle needing it";
}

TEST_F(DeviceDlopen, LdPreloadInterposesADeviceDefinition) {
  DEVDL_ONLY_ON_OPENCL("devdl_value_probe launches through OpenCL");
  // The probe is linked with the host library carrying DupValue = 1.
  CommandResult plain = devdl::test::run({DEVDL_TEST_VALUE_PROBE, deviceImage("value_user")});
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(plain.out, "DupValue 1\n");

  setenv("LD_PRELOAD", DEVDL_TEST_VALUE_TWO, 1);
  setenv("DEVDL_DEBUG", "symbols,bindings", 1);
  // Under AddressSanitizer the preloaded object would come before its runtime, which it refuses.
  const char *asan = std::getenv("ASAN_OPTIONS");
  setenv("ASAN_OPTIONS", (std::string(asan ? asan : "") + ":verify_asan_link_order=0").c_str(), 1);
  CommandResult preloaded = devdl::test::run({DEVDL_TEST_VALUE_PROBE, deviceImage("value_user")});
  unsetenv("LD_PRELOAD");
  unsetenv("DEVDL_DEBUG");
  ASSERT_EQ(preloaded.status, 0) << preloaded.err;
  EXPECT_EQ(preloaded.out, "DupValue 2\n") << "the preloaded object comes first in link-map order";
  // DEVDL_DEBUG reports the ODR violation and the binding that resolved it.
  EXPECT_NE(preloaded.err.find("devdl: duplicate definition of `DupValue` in "), std::string::npos) << preloaded.err;
  EXPECT_NE(preloaded.err.find("libdevdl_test_value_two.so: image 0 (spirv) is used)"), std::string::npos)
      << preloaded.err;
  EXPECT_NE(preloaded.err.find("devdl: binding `DupValue`: " + deviceImage("value_user") +
                               ": image 0 (spirv) -> " + DEVDL_TEST_VALUE_TWO + ": image 0 (spirv)"),
            std::string::npos)
      << preloaded.err;
}

TEST_F(DeviceDlopen, DevdlPreloadComesBeforeTheLibraries) {
  DEVDL_ONLY_ON_OPENCL("devdl_value_probe launches through OpenCL");
  // The probe is linked with the host library carrying DupValue = 1; the preloaded image's
  // DupValue = 2 comes first, as an LD_PRELOAD object would.
  setenv("DEVDL_PRELOAD", ("/nonexistent/missing.spv:" + deviceImage("value_two")).c_str(), 1);
  CommandResult preloaded = devdl::test::run({DEVDL_TEST_VALUE_PROBE, deviceImage("value_user")});
  unsetenv("DEVDL_PRELOAD");
  ASSERT_EQ(preloaded.status, 0) << preloaded.err;
  EXPECT_EQ(preloaded.out, "DupValue 2\n");
  EXPECT_EQ(preloaded.err, "devdl: DEVDL_PRELOAD: /nonexistent/missing.spv: No such file or directory: ignored\n");
  // DEVDL_DEBUG reports the library's definition as the hidden one: the scope is reported
  // once the preloaded image has taken its place.
  setenv("DEVDL_PRELOAD", deviceImage("value_two").c_str(), 1);
  setenv("DEVDL_DEBUG", "symbols", 1);
  CommandResult debug = devdl::test::run({DEVDL_TEST_VALUE_PROBE, deviceImage("value_user")});
  unsetenv("DEVDL_PRELOAD");
  unsetenv("DEVDL_DEBUG");
  ASSERT_EQ(debug.status, 0) << debug.err;
  EXPECT_NE(debug.err.find("libdevdl_test_value_one.so: image 0 (spirv) (the one in " + deviceImage("value_two") +
                           ": image 0 (spirv) is used)"),
            std::string::npos)
      << debug.err;
  EXPECT_EQ(debug.err.find("in " + deviceImage("value_two") + ": image 0 (spirv) (the one in"), std::string::npos)
      << debug.err;
}

}  // namespace
}  // namespace devdl::test
