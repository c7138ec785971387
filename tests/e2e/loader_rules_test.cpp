// Loader rules.
#include "e2e/dlopen_fixture.h"

#include <filesystem>

namespace devdl::test {
namespace {

TEST_F(DeviceDlopen, NowFailsNamingSymbolImageAndFile) {
  EXPECT_EQ(device_dlopen(deviceImage("app").c_str(), DEVDL_NOW), nullptr);
  EXPECT_EQ(error(), where("app") + ": undefined device symbol `LibDeviceFunc`");
  EXPECT_EQ(device_dlerror(), nullptr) << "cleared on read";
  // The failed open left nothing behind: NOLOAD does not find it.
  EXPECT_EQ(device_dlopen(deviceImage("app").c_str(), DEVDL_NOW | DEVDL_NOLOAD), nullptr);
}

TEST_F(DeviceDlopen, NowChecksTheImportsOfALibraryWithoutKernels) {
  // chain_mid has no kernel; it imports ChainBase. As RTLD_NOW, its imports resolve at the
  // open or the open fails and leaves nothing behind.
  EXPECT_EQ(device_dlopen(deviceImage("chain_mid").c_str(), DEVDL_NOW), nullptr);
  EXPECT_EQ(error(), where("chain_mid") + ": undefined device symbol `ChainBase`");
  EXPECT_EQ(device_dlopen(deviceImage("chain_mid").c_str(), DEVDL_LAZY | DEVDL_NOLOAD), nullptr);
  // LAZY opens it; NOW does once its import is there.
  void *lazy = device_dlopen(deviceImage("chain_mid").c_str(), DEVDL_LAZY);
  ASSERT_NE(lazy, nullptr) << error();
  EXPECT_EQ(device_dlclose(lazy), 0);
  void *base = device_dlopen(deviceImage("chain_base").c_str(), DEVDL_NOW | DEVDL_GLOBAL);
  ASSERT_NE(base, nullptr) << error();
  void *mid = device_dlopen(deviceImage("chain_mid").c_str(), DEVDL_NOW);
  EXPECT_NE(mid, nullptr) << error();
  device_dlclose(mid);
  device_dlclose(base);
}

TEST_F(DeviceDlopen, ReopeningALazyHandleNowLinksItNow) {
  const std::string undefined = where("app") + ": undefined device symbol `LibDeviceFunc`";
  void *app = device_dlopen(deviceImage("app").c_str(), DEVDL_LAZY);
  ASSERT_NE(app, nullptr) << error();
  // As dlopen(RTLD_NOW) of a library already loaded lazily: the links are made now, and a
  // failure leaves the handle as it was (one reference).
  EXPECT_EQ(device_dlopen(deviceImage("app").c_str(), DEVDL_NOW), nullptr);
  EXPECT_EQ(error(), undefined);
  void *lib = device_dlopen(deviceImage("lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_NE(lib, nullptr) << error();
  EXPECT_EQ(device_dlopen(deviceImage("app").c_str(), DEVDL_NOW), app) << error();
  EXPECT_EQ(device_dlclose(app), 0);
  EXPECT_EQ(device_dlopen(deviceImage("app").c_str(), DEVDL_LAZY | DEVDL_NOLOAD), app);  // one left, and this one
  EXPECT_EQ(device_dlclose(app), 0);
  EXPECT_EQ(device_dlclose(app), 0);
  EXPECT_EQ(device_dlopen(deviceImage("app").c_str(), DEVDL_LAZY | DEVDL_NOLOAD), nullptr);
  device_dlclose(lib);
}

TEST_F(DeviceDlopen, LocalLibraryIsNotInTheGlobalScopeUntilPromoted) {
  void *lib = device_dlopen(deviceImage("lib").c_str(), DEVDL_LAZY | DEVDL_LOCAL);
  ASSERT_NE(lib, nullptr) << error();
  EXPECT_EQ(device_dlopen(deviceImage("app").c_str(), DEVDL_NOW), nullptr);
  EXPECT_NE(error().find("LibDeviceFunc"), std::string::npos);
  EXPECT_EQ(device_dlopen(deviceImage("lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL), lib) << "promoted, same handle";
  void *app = device_dlopen(deviceImage("app").c_str(), DEVDL_NOW);
  ASSERT_NE(app, nullptr) << error();
  device_dlclose(app);
  device_dlclose(lib);
  device_dlclose(lib);
}

TEST_F(DeviceDlopen, ReferenceCountsNoloadAndClose) {
  const std::string path = deviceImage("lib");
  EXPECT_EQ(device_dlopen(path.c_str(), DEVDL_LAZY | DEVDL_NOLOAD), nullptr);
  EXPECT_NE(error().find("not loaded"), std::string::npos);
  void *first = device_dlopen(path.c_str(), DEVDL_LAZY);
  ASSERT_NE(first, nullptr) << error();
  EXPECT_EQ(device_dlopen(path.c_str(), DEVDL_LAZY), first);
  EXPECT_EQ(device_dlopen(path.c_str(), DEVDL_LAZY | DEVDL_NOLOAD), first);
  EXPECT_EQ(device_dlclose(first), 0);
  EXPECT_EQ(device_dlclose(first), 0);
  EXPECT_EQ(device_dlopen(path.c_str(), DEVDL_LAZY | DEVDL_NOLOAD), first) << "one reference left";
  EXPECT_EQ(device_dlclose(first), 0);
  EXPECT_EQ(device_dlclose(first), 0);
  EXPECT_NE(device_dlclose(first), 0) << "closed at zero: no longer a handle";
  EXPECT_EQ(error(), "device_dlclose: invalid handle");
  EXPECT_EQ(device_dlopen(path.c_str(), DEVDL_LAZY | DEVDL_NOLOAD), nullptr);
}

TEST_F(DeviceDlopen, NodeleteKeepsTheHandleAndCountsWithoutWrapping) {
  const std::string path = deviceImage("lib");
  void *lib = device_dlopen(path.c_str(), DEVDL_LAZY | DEVDL_NODELETE);
  ASSERT_NE(lib, nullptr) << error();
  EXPECT_EQ(device_dlclose(lib), 0);
  EXPECT_EQ(device_dlopen(path.c_str(), DEVDL_LAZY | DEVDL_NOLOAD), lib) << "NODELETE: still loaded";
  EXPECT_EQ(device_dlclose(lib), 0);
  // No reference is left: one more close is refused, and the count stays at zero.
  EXPECT_NE(device_dlclose(lib), 0);
  EXPECT_EQ(error(), "device_dlclose: " + path + " is not open (DEVDL_NODELETE keeps it loaded)");
  EXPECT_EQ(device_dlopen(path.c_str(), DEVDL_LAZY), lib);
  EXPECT_EQ(device_dlclose(lib), 0);
  EXPECT_NE(device_dlclose(lib), 0) << "one open, one close: none left";
}

TEST_F(DeviceDlopen, NamesWithoutASlashAreSearchedInTheLibraryPath) {
  // Like LD_LIBRARY_PATH: each directory in turn (missing ones skipped), then the name as given.
  const std::string dir = std::filesystem::path(deviceImage("lib")).parent_path().string();
  const std::string name = "lib" + extension_;
  setenv("DEVDL_LIBRARY_PATH", ("/nonexistent::" + dir).c_str(), 1);
  void *lib = device_dlopen(name.c_str(), DEVDL_LAZY);
  unsetenv("DEVDL_LIBRARY_PATH");
  ASSERT_NE(lib, nullptr) << error();
  devdl_symbol_info info{};
  info.size = sizeof info;
  ASSERT_EQ(device_dlsyminfo(lib, "LibDeviceFunc", &info), 0) << error();
  EXPECT_EQ(std::string(info.file), dir + "/" + name);
  EXPECT_EQ(device_dlclose(lib), 0);
  EXPECT_EQ(device_dlopen(name.c_str(), DEVDL_LAZY), nullptr);  // not in the working directory
  EXPECT_EQ(error(), name + ": No such file or directory");
}

TEST_F(DeviceDlopen, LinkPlanOfAKernel) {
  void *app = device_dlopen(deviceImage("app").c_str(), DEVDL_LAZY);
  ASSERT_NE(app, nullptr) << error();
  EXPECT_EQ(device_dlplan(app, "AppKernel"), nullptr);
  EXPECT_EQ(error(), "AppKernel: " + where("app") + "\n  LibDeviceFunc (" + where("app") + ") -> undefined\n");
  void *lib = device_dlopen(deviceImage("lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  const char *plan = device_dlplan(app, "AppKernel");
  ASSERT_NE(plan, nullptr) << error();
  EXPECT_EQ(std::string(plan),
            "AppKernel: " + where("app") + "\n  LibDeviceFunc (" + where("app") + ") -> " + where("lib") + "\n");
  device_dlclose(lib);
  device_dlclose(app);
}

}  // namespace
}  // namespace devdl::test
