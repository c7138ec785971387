// The end-to-end suite (e2e/dlopen_fixture.h): host libraries carrying device images (devdl-pack's
// objects, DPC++'s offload tables) in the scopes the host loader puts them in: invisible while
// RTLD_LOCAL, global once promoted, whatever their bundle's symbol; kept loaded while a program uses
// their images, unloaded after; a second copy told local once the first has gone.
#include "e2e/dlopen_fixture.h"

#include <dlfcn.h>

#include <string>
#include <vector>

namespace devdl::test {
namespace {

// The host libraries carrying images (tests/CMakeLists.txt: devdl_carrier) carry SPIR-V, and the
// GPU machine gets none of them.
#define DEVDL_CARRIES_SPIRV() DEVDL_ONLY_ON_SPIRV("the host libraries carrying images carry SPIR-V")

TEST_F(DeviceDlopen, HostLibraryLoadedLocalIsInvisibleUntilPromotedGlobal) {
  DEVDL_CARRIES_SPIRV();
  // devdl_test_linked carries lib.spv (packed by devdl-pack --object).
  void *host = dlopen(DEVDL_TEST_LINKED, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(host, nullptr) << dlerror();
  EXPECT_EQ(device_dlopen(deviceImage("app").c_str(), DEVDL_NOW), nullptr);
  EXPECT_NE(error().find("LibDeviceFunc"), std::string::npos);

  ASSERT_EQ(dlopen(DEVDL_TEST_LINKED, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL), host);
  void *app = device_dlopen(deviceImage("app").c_str(), DEVDL_NOW);
  ASSERT_NE(app, nullptr) << error();
  void *kernel = device_dlsym(app, "AppKernel");
  ASSERT_NE(kernel, nullptr) << error();
  EXPECT_EQ(run(kernel, 3), (std::vector<int>{0, 2, 4}));
  // The global scope itself finds the kernel too.
  void *global = device_dlopen(nullptr, DEVDL_LAZY);
  EXPECT_EQ(device_dlsym(global, "AppKernel"), nullptr) << "app.spv was opened LOCAL";
  device_dlclose(app);
  dlclose(host);
  dlclose(host);
  expectTheGlobalScopeLacksLibDeviceFunc("unloaded by the host");
}

// A host library carrying lib.spv unloads when the host closes it, unless a devdl program uses
// its images: then devdl holds a reference on it until the program goes (before, asking whether
// it was global made glibc mark it NODELETE, and it never unloaded).
TEST_F(DeviceDlopen, AHostLibraryUnloadsOnceNoProgramUsesIt) {
  DEVDL_CARRIES_SPIRV();
  void *host = nullptr, *app = nullptr;
  ASSERT_NO_FATAL_FAILURE(openAppOverAGlobalHostLibrary(DEVDL_TEST_LINKED, host, app));
  void *kernel = device_dlsym(app, "AppKernel");
  ASSERT_NE(kernel, nullptr) << error();
  ASSERT_EQ(dlclose(host), 0);
  void *still = dlopen(DEVDL_TEST_LINKED, RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(still, nullptr) << "app.spv's program uses its image";
  if (still) dlclose(still);
  EXPECT_EQ(run(kernel, 3), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(device_dlclose(app), 0);
  EXPECT_EQ(dlopen(DEVDL_TEST_LINKED, RTLD_NOW | RTLD_NOLOAD), nullptr) << "devdl let it go with the program";
  expectTheGlobalScopeLacksLibDeviceFunc("unloaded by the host");
  // Loaded again, it is seen again.
  host = dlopen(DEVDL_TEST_LINKED, RTLD_NOW | RTLD_GLOBAL);
  ASSERT_NE(host, nullptr) << dlerror();
  devdl_symbol_info info{};
  info.size = sizeof info;
  EXPECT_EQ(device_dlsyminfo(device_dlopen(nullptr, DEVDL_LAZY), "LibDeviceFunc", &info), 0) << error();
  dlclose(host);
  expectTheGlobalScopeLacksLibDeviceFunc("unloaded again");
}

// Whether a host library is in the global scope does not depend on its bundle's symbol: one named
// by devdl-pack --symbol, one a version script made local.
TEST_F(DeviceDlopen, AnyHostLibraryJoinsTheGlobalScopeWhenPromoted) {
  DEVDL_CARRIES_SPIRV();
  for (const char *library : {DEVDL_TEST_NAMED, DEVDL_TEST_HIDDEN}) {
    void *host = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(host, nullptr) << dlerror();
    EXPECT_EQ(device_dlopen(deviceImage("app").c_str(), DEVDL_NOW), nullptr) << library << " is RTLD_LOCAL";
    ASSERT_EQ(dlopen(library, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL), host);
    void *app = device_dlopen(deviceImage("app").c_str(), DEVDL_NOW);
    ASSERT_NE(app, nullptr) << library << ": " << error();
    EXPECT_EQ(run(device_dlsym(app, "AppKernel"), 3), (std::vector<int>{0, 2, 4}));
    EXPECT_EQ(device_dlclose(app), 0);
    dlclose(host);
    dlclose(host);
    EXPECT_EQ(dlopen(library, RTLD_NOW | RTLD_NOLOAD), nullptr) << library << " unloaded";
    expectTheGlobalScopeLacksLibDeviceFunc(std::string(library) + " unloaded");
  }
}

// Whether a second copy of a global library is global cannot be told by its exports while the
// first is loaded (their bundles and names are the same): it is taken as global then, harmless
// since the first's identical images come before it, and asked again at each scan, so that it
// leaves the global scope once the first has gone.
TEST_F(DeviceDlopen, ASecondCopyOfAGlobalLibraryIsToldLocalOnceTheFirstGoes) {
  DEVDL_CARRIES_SPIRV();
  void *first = dlopen(DEVDL_TEST_TWIN_FIRST, RTLD_NOW | RTLD_GLOBAL);
  ASSERT_NE(first, nullptr) << dlerror();
  void *second = dlopen(DEVDL_TEST_TWIN_SECOND, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(second, nullptr) << dlerror();
  void *global = device_dlopen(nullptr, DEVDL_LAZY);
  devdl_symbol_info info{};
  info.size = sizeof info;
  ASSERT_EQ(device_dlsyminfo(global, "LibDeviceFunc", &info), 0) << error();
  EXPECT_EQ(std::string(info.file), DEVDL_TEST_TWIN_FIRST);
  ASSERT_EQ(dlclose(first), 0);
  EXPECT_NE(device_dlsyminfo(global, "LibDeviceFunc", &info), 0) << "found in " << info.file << ", loaded RTLD_LOCAL";
  EXPECT_EQ(error(), "the global scope: undefined device symbol `LibDeviceFunc`");
  ASSERT_EQ(dlopen(DEVDL_TEST_TWIN_SECOND, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL), second);
  ASSERT_EQ(device_dlsyminfo(global, "LibDeviceFunc", &info), 0) << error();
  EXPECT_EQ(std::string(info.file), DEVDL_TEST_TWIN_SECOND) << "promoted";
  dlclose(second);
  dlclose(second);
  expectTheGlobalScopeLacksLibDeviceFunc("both copies unloaded");
}

// The same library loaded by the host, as a SYCL application loads its libraries: an object that
// imports __sycl_register_lib has its offload tables read from its file, and its images are in
// the scopes the object is in, for as long as it is loaded.
TEST_F(DeviceDlopen, AHostLoadedLibraryInDpcppsFormLendsItsImages) {
  DEVDL_ONLY_ON_SPIRV("the library carries SPIR-V");
  void *host = nullptr, *app = nullptr;
  ASSERT_NO_FATAL_FAILURE(openAppOverAGlobalHostLibrary(DEVDL_TEST_DPCPP_TABLES, host, app));
  EXPECT_EQ(run(device_dlsym(app, "AppKernel"), 4), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(device_dlclose(app), 0);
  ASSERT_EQ(dlclose(host), 0);
  expectTheGlobalScopeLacksLibDeviceFunc("unloaded by the host");
}

}  // namespace
}  // namespace devdl::test
