// Every entry point from many threads at once (run under ThreadSanitizer by
// `scripts/test.sh --tsan`): opens, symbol lookups, closes and errors interleave; each thread
// sees its own errors, and its own kernel object of the same program (OpenCL's hold arguments).
#include "store/disk_cache.h"
#include "store/image_summary.h"
#include "devdl.h"
#include "e2e/dlopen_fixture.h"  // loadedImageFiles
#include "e2e/opencl_run.h"
#include "test_support.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
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
      void *mine = nullptr;
      for (int round = 0; round < kRounds; ++round) {
        // More references to the open handles: the same handles; this thread's own kernel, the
        // same in every round.
        void *l = device_dlopen(libPath.c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
        void *a = device_dlopen(appPath.c_str(), DEVDL_NOW);
        check(l == lib && a == app);
        void *k = device_dlsym(a, "AppKernel");
        if (!mine) mine = k;
        check(k && k == mine && k != kernel);
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

// A kernel object holds its arguments: threads that share one race from clSetKernelArg to the
// launch. Each thread gets its own, so that eight threads setting their own buffers on one kernel
// name and launching it, again and again, each read what they launched (with one object for all,
// results went to other threads' buffers, or the enqueue failed).
TEST(Threads, EachThreadSetsItsOwnArgumentsOnItsOwnKernelObject) {
  devdl_native native{};
  native.size = sizeof native;
  if (device_dlnative(&native) != 0) GTEST_SKIP() << "no OpenCL device to run on: " << device_dlerror();
  if (native.backend != DEVDL_BACKEND_OPENCL) GTEST_SKIP() << "launches through OpenCL";
  void *lib = device_dlopen(image("lib.spv").c_str(), DEVDL_NOW | DEVDL_GLOBAL);
  ASSERT_NE(lib, nullptr) << device_dlerror();
  void *app = device_dlopen(image("app.spv").c_str(), DEVDL_NOW);
  ASSERT_NE(app, nullptr) << device_dlerror();
  constexpr size_t kItems = 64;
  auto context = static_cast<cl_context>(native.context);
  auto device = static_cast<cl_device_id>(native.device);
  const std::vector<int> expected = runIntKernel(context, device, static_cast<cl_kernel>(device_dlsym(app, "AppKernel")), kItems);
  ASSERT_EQ(expected.size(), kItems);
  expectEachThreadLaunchesItsOwnKernel(app, "AppKernel", context, device, expected, kThreads, 20);
  EXPECT_EQ(device_dlclose(app), 0);
  EXPECT_EQ(device_dlclose(lib), 0);
}

TEST(Threads, LoadsThroughTheDiskCacheAtOnce) {
  // The process's disk cache is set up from the environment at its first link: the threads
  // run in a new process of this program, given a cache of its own (and, under ThreadSanitizer,
  // checked there too: a race fails it). The seed's library is the large one, which the threads
  // open by its summary once one stored it, and read to link (store/image_summary.h).
  const std::string libPath = image("lib_large.spv");
  if (!std::getenv("DEVDL_TEST_THREADS_CHILD")) {
    // Summarized only once it last changed long enough ago (just built, it may not have).
    struct stat st {};
    ASSERT_EQ(stat(libPath.c_str(), &st), 0);
    const auto settled = std::chrono::system_clock::from_time_t(st.st_ctim.tv_sec + store::kSettledSeconds + 1);
    std::this_thread::sleep_until(settled);
    const std::string dir = scratchDir() + "/cache";
    setenv("DEVDL_TEST_THREADS_CHILD", "1", 1);
    setenv("DEVDL_CACHE_DIR", dir.c_str(), 1);
    const char *off = std::getenv("DEVDL_CACHE");
    const std::string saved = off ? off : "";
    unsetenv("DEVDL_CACHE");
    CommandResult child = run({"/proc/self/exe", "--gtest_filter=Threads.LoadsThroughTheDiskCacheAtOnce"});
    unsetenv("DEVDL_TEST_THREADS_CHILD");
    unsetenv("DEVDL_CACHE_DIR");
    if (off) setenv("DEVDL_CACHE", saved.c_str(), 1);
    ASSERT_EQ(child.status, 0) << child.out << child.err;
    if (child.out.find("[  SKIPPED ]") != std::string::npos) GTEST_SKIP() << child.out;
    EXPECT_NE(child.out.find("[  PASSED  ] 1 test"), std::string::npos) << child.out;
    const auto entries = llvm::cantFail(store::DiskCache(dir, ~uint64_t(0)).list());
    EXPECT_EQ(entries.size(), 3u) << "one entry for each program, and the large library's summary";
    EXPECT_EQ(std::count_if(entries.begin(), entries.end(),
                            [&](const auto &entry) { return entry.description == "image summary of " + libPath; }),
              1);
    for (const auto &entry : entries) EXPECT_EQ(entry.problem, "") << entry.path;
    return;
  }
  devdl_native native{};
  native.size = sizeof native;
  if (device_dlnative(&native) != 0) GTEST_SKIP() << "no OpenCL device to run on: " << device_dlerror();
  const std::string users[] = {image("app.spv"), image("chain_top.spv")};
  const std::string chain[] = {image("chain_mid.spv"), image("chain_base.spv")};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 10; ++round) {
        // Every round opens and closes all it uses: each load is a disk cache lookup (the
        // first ones miss and store), under the loader's lock with the other threads' opens.
        const bool seed = (t + round) % 2 == 0;
        std::vector<void *> handles;
        for (const std::string &path : seed ? std::vector<std::string>{libPath} : std::vector<std::string>(chain, chain + 2))
          handles.push_back(device_dlopen(path.c_str(), DEVDL_LAZY | DEVDL_GLOBAL));
        void *user = device_dlopen(users[seed ? 0 : 1].c_str(), DEVDL_NOW);
        if (!user || !device_dlsym(user, seed ? "AppKernel" : "ChainKernel")) ++failures;
        if (user) device_dlclose(user);
        for (void *h : handles)
          if (!h || device_dlclose(h) != 0) ++failures;
      }
    });
  for (auto &t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

// A host library's constructor and destructor call devdl while glibc holds its loader lock; another
// thread calls devdl meanwhile, which asks glibc about the loaded objects. devdl never waits for
// glibc's lock while holding its own, so neither thread waits for the other for ever (it did: one
// thread held devdl's mutex in dlsym, the other glibc's lock in the constructor).
TEST(Threads, HostConstructorsCallingDevdlNeverDeadlock) {
  constexpr int kCycles = 2000;
  // The device first, as an application opens it before it loads plugins from threads: the
  // OpenCL ICD loader, started by a constructor while another thread starts it too, waits inside
  // itself for glibc's lock (docs/limits.md). devdl opens no device in a scan of the host's objects.
  devdl_native native{};
  native.size = sizeof native;
  if (device_dlnative(&native) != 0) GTEST_SKIP() << "no OpenCL device to run on: " << device_dlerror();
  std::atomic<bool> stop{false};
  std::atomic<int> lookups{0};
  std::thread other([&] {
    const std::string lib = image("lib.spv");
    while (!stop) {
      void *global = device_dlopen(nullptr, DEVDL_LAZY);
      device_dlsym(global, "LibDeviceFunc");
      void *handle = device_dlopen(lib.c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
      device_dliterate([](const devdl_image_info *, void *) { return 0; }, nullptr);
      if (handle) device_dlclose(handle);
      device_dlerror();
      ++lookups;
    }
  });
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    void *host = dlopen(DEVDL_TEST_CONSTRUCTOR, RTLD_NOW | (cycle % 2 ? RTLD_GLOBAL : RTLD_LOCAL));
    ASSERT_NE(host, nullptr) << dlerror();
    ASSERT_EQ(dlclose(host), 0);
  }
  stop = true;
  other.join();
  EXPECT_GT(lookups.load(), 0);
  // Each unload was seen: nothing of the library is left in the scopes.
  EXPECT_EQ(dlopen(DEVDL_TEST_CONSTRUCTOR, RTLD_NOW | RTLD_NOLOAD), nullptr) << "unloaded every time";
  for (const std::string &file : loadedImageFiles()) EXPECT_EQ(file.find("devdl_test_constructor"), std::string::npos) << file;
}

}  // namespace
}  // namespace devdl::test
