// Every entry point from many threads at once (run under ThreadSanitizer by
// `scripts/test.sh --tsan`): opens, symbol lookups, closes and errors interleave; each thread
// sees its own errors and the same kernel object for the same program.
#include "devdl.h"
#include "test_support.h"

#include <atomic>
#include <thread>

namespace devdl::test {
namespace {

constexpr int kThreads = 8, kRounds = 50;

TEST(Threads, EveryEntryPointAtOnce) {
  devdl_native native{};
  native.size = sizeof native;
  if (device_dlnative(&native) != 0) GTEST_SKIP() << "no OpenCL device to run on: " << device_dlerror();
  // Held open for the whole test, so that the program is built once and then shared.
  void *lib = device_dlopen(image("lib.spv").c_str(), DEVDL_NOW | DEVDL_GLOBAL);
  ASSERT_NE(lib, nullptr) << device_dlerror();
  void *app = device_dlopen(image("app.spv").c_str(), DEVDL_NOW);
  ASSERT_NE(app, nullptr) << device_dlerror();
  void *kernel = device_dlsym(app, "AppKernel");
  ASSERT_NE(kernel, nullptr) << device_dlerror();

  const std::string libPath = image("lib.spv"), appPath = image("app.spv");
  const std::string chain[] = {image("chain_base.spv"), image("chain_mid.spv"), image("chain_top.spv")};
  std::atomic<int> failures{0};
  auto check = [&](bool ok) {
    if (!ok) ++failures;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        // More references to the open handles: the same handles, the same kernel.
        void *l = device_dlopen(libPath.c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
        void *a = device_dlopen(appPath.c_str(), DEVDL_NOW);
        check(l == lib && a == app);
        check(device_dlsym(a, "AppKernel") == kernel);
        check(device_dlsym(device_dlopen(nullptr, DEVDL_LAZY), "LibDeviceFunc") == nullptr);
        check(device_dlclose(a) == 0 && device_dlclose(l) == 0);
        // Loads and unloads of other images, lazily: never built.
        void *c = device_dlopen(chain[(t + round) % 3].c_str(), (round % 2 ? DEVDL_GLOBAL : DEVDL_LOCAL) | DEVDL_LAZY);
        check(c != nullptr);
        // This thread's own error, whatever the others do.
        const std::string missing = "/nonexistent/" + std::to_string(t) + ".spv";
        check(device_dlopen(missing.c_str(), DEVDL_LAZY) == nullptr);
        const char *e = device_dlerror();
        check(e && std::string(e) == missing + ": No such file or directory");
        check(device_dlerror() == nullptr);
        check(device_dlclose(c) == 0);
      }
    });
  for (auto &t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(device_dlclose(app), 0);
  EXPECT_EQ(device_dlclose(lib), 0);
}

}  // namespace
}  // namespace devdl::test
