// The loader from many threads over the fake backend (a test double: no device code runs): builds
// run without the loader's lock, one per program however long it takes, a device is opened once,
// and a lookup of what is linked never waits for a build nor takes the lock. A link or a device's
// opening can be held at a gate, to see what other threads do meanwhile; a host library's
// constructor (devdl_test_constructor_hook) calls the loader with glibc's lock held. Run under
// ThreadSanitizer by scripts/test.sh --tsan.
#include "unit/loader_fixture.h"

#include "devdl.h"

#include <dlfcn.h>

#include <barrier>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <thread>

namespace devdl::test {
namespace {

// What devdl_test_constructor_hook, called by the constructor of the library of that name, runs.
std::function<void()> constructorCall;

}  // namespace
}  // namespace devdl::test

extern "C" __attribute__((visibility("default"))) void devdl_test_constructor_hook() {
  if (devdl::test::constructorCall) devdl::test::constructorCall();
}

namespace devdl::test {
namespace {

using namespace std::chrono_literals;

// Links, or devices being opened, wait here until the test opens it.
class Gate {
 public:
  void pass() {
    std::unique_lock lock(mutex_);
    ++waiting_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return open_; });
  }
  /// Whether `count` links wait at the gate at once within `bound` (a bound on a hang, not a
  /// measure of speed: they arrive within microseconds when the loader lets them).
  bool waitFor(int count, std::chrono::seconds bound = 30s) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, bound, [&] { return waiting_ >= count; });
  }
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }
  /// How many have come to the gate.
  int count() {
    std::lock_guard lock(mutex_);
    return waiting_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int waiting_ = 0;
  bool open_ = false;
};

class LoaderThreads : public LoaderFixture {
 protected:
  // A thread waits for another's build for a minute here: "one build" never depends on timing.
  // ABuildHeldPastTheBoundIsNotWaitedForForEver makes a loader of its own with a short bound.
  LoaderThreads() : LoaderFixture(std::chrono::minutes(1)) {}
  void TearDown() override {
    gate_.open();
    opens_.open();
    fake::setLinkHook(nullptr);
    fake::setOpenHook(nullptr);
  }
  void holdLinks() {
    fake::setLinkHook([this](const fake::Link &) { gate_.pass(); });
  }
  // The lookup from a new thread, whose lookups remembered are none: it takes the loader's lock.
  void *symbolFromNewThread(void *handle, std::string_view name) {
    void *found = nullptr;
    std::thread([&] { found = symbol(handle, name); }).join();
    return found;
  }

  static void *found(llvm::Expected<void *> kernel) {
    if (kernel) return *kernel;
    ADD_FAILURE() << llvm::toString(kernel.takeError());
    return nullptr;
  }
  // `find` on a thread held at `gate`, then on one inside a host constructor, which goes on past
  // the bound to the gate too (the holder may wait for the host loader's lock it holds); then the
  // gate opens. What each found.
  std::pair<void *, void *> heldThenFromAConstructor(Gate &gate, const std::function<void *()> &find) {
    void *held = nullptr, *inConstructor = nullptr;
    std::thread first([&] { held = find(); });
    EXPECT_TRUE(gate.waitFor(1));
    std::thread second([&] { loadCallingFromConstructor([&] { inConstructor = find(); }); });
    EXPECT_TRUE(gate.waitFor(2)) << "the thread in the constructor waited for ever";
    gate.open();
    first.join();
    second.join();
    return {held, inConstructor};
  }
  // Runs `call` in the constructor of a host library loaded now: with the host loader's lock held.
  static void loadCallingFromConstructor(std::function<void()> call) {
    constructorCall = std::move(call);
    void *library = dlopen(DEVDL_TEST_CONSTRUCTOR_HOOK, RTLD_NOW | RTLD_LOCAL);
    constructorCall = nullptr;
    ASSERT_NE(library, nullptr) << dlerror();
    dlclose(library);
  }

  Gate gate_;   // links
  Gate opens_;  // devices being opened
};

TEST_F(LoaderThreads, ALinkedKernelIsFoundWhileAnotherProgramBuilds) {
  open("lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("app.spv", DEVDL_NOW);
  void *kernel = symbol(app, "AppKernel");
  open("chain_base.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  open("chain_mid.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *top = open("chain_top.spv", DEVDL_LAZY);
  holdLinks();
  std::thread builder([&] { EXPECT_NE(symbol(top, "ChainKernel"), nullptr); });
  ASSERT_TRUE(gate_.waitFor(1));
  // The build is held in the backend: lookups of what is linked are answered meanwhile, through
  // the loader's lock (a new thread) and without it.
  EXPECT_EQ(symbolFromNewThread(app, "AppKernel"), kernel);
  EXPECT_EQ(symbol(app, "AppKernel"), kernel);
  auto other = loader_.open(image("kernel_lib.spv").c_str(), DEVDL_LAZY);
  EXPECT_TRUE(!!other) << "opens go on too";
  if (!other) llvm::consumeError(other.takeError());
  gate_.open();
  builder.join();
  EXPECT_EQ(links().size(), 2u);
}

TEST_F(LoaderThreads, TwoProgramsBuildAtOnce) {
  open("lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("app.spv", DEVDL_LAZY);
  open("chain_base.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  open("chain_mid.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *top = open("chain_top.spv", DEVDL_LAZY);
  holdLinks();
  std::thread first([&] { EXPECT_NE(symbol(app, "AppKernel"), nullptr); });
  std::thread second([&] { EXPECT_NE(symbol(top, "ChainKernel"), nullptr); });
  EXPECT_TRUE(gate_.waitFor(2)) << "the two links never ran at the same time";
  gate_.open();
  first.join();
  second.join();
  EXPECT_EQ(links().size(), 2u);
}

TEST_F(LoaderThreads, TwoThreadsNeedingOneProgramWaitForOneBuild) {
  open("lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("app.spv", DEVDL_LAZY);
  holdLinks();
  void *firstFound = nullptr, *secondFound = nullptr;
  std::thread first([&] { firstFound = symbol(app, "AppKernel"); });
  ASSERT_TRUE(gate_.waitFor(1));
  std::thread second([&] { secondFound = symbol(app, "AppKernel"); });
  std::this_thread::sleep_for(50ms);  // time for it to find the build under way, not a measure
  gate_.open();
  first.join();
  second.join();
  EXPECT_EQ(links().size(), 1u) << "the second thread built the program again";
  EXPECT_NE(firstFound, nullptr);
  EXPECT_EQ(firstFound, secondFound);
}

TEST_F(LoaderThreads, ASlowBuildIsBuiltOnceForEveryThread) {
  // Eight threads need one program whose link takes 3 s, three times the bound: they wait for
  // it whatever the time, since none holds the host loader's lock.
  Loader loader{{fake::backends(), noStore, ""}};
  ASSERT_EQ(Loader::Options{}.hostLockWait, std::chrono::seconds(1)) << "the default bound";
  ASSERT_TRUE(!!loader.open(image("lib.spv").c_str(), DEVDL_LAZY | DEVDL_GLOBAL));
  auto opened = loader.open(image("app.spv").c_str(), DEVDL_LAZY);
  ASSERT_TRUE(!!opened);
  fake::setLinkHook([](const fake::Link &) { std::this_thread::sleep_for(3s); });
  void *found[8] = {};
  std::vector<std::thread> threads;
  for (void *&mine : found)
    threads.emplace_back([&] {
      auto kernel = loader.symbol(*opened, "AppKernel");
      if (kernel) mine = *kernel;
      else ADD_FAILURE() << llvm::toString(kernel.takeError());
    });
  for (auto &t : threads) t.join();
  EXPECT_EQ(links().size(), 1u);
  for (void *mine : found) EXPECT_EQ(mine, found[0]) << "one program";
  EXPECT_NE(found[0], nullptr);
}

TEST_F(LoaderThreads, AWaiterInAHostConstructorBuildsAfterTheBound) {
  // The builder may wait for the host loader's lock that a waiter in a host constructor holds:
  // past the bound that waiter builds on its own. Both get the one program kept.
  Loader loader{{fake::backends(), noStore, "", 100ms}};
  ASSERT_TRUE(!!loader.open(image("lib.spv").c_str(), DEVDL_LAZY | DEVDL_GLOBAL));
  auto opened = loader.open(image("app.spv").c_str(), DEVDL_LAZY);
  ASSERT_TRUE(!!opened);
  void *app = *opened;
  holdLinks();
  auto [firstFound, inConstructor] = heldThenFromAConstructor(gate_, [&] { return found(loader.symbol(app, "AppKernel")); });
  EXPECT_EQ(links().size(), 2u);
  EXPECT_NE(firstFound, nullptr);
  EXPECT_EQ(firstFound, inConstructor) << "one program kept";
}

TEST_F(LoaderThreads, ThreadsStartingTogetherOpenTheDeviceOnce) {
  // Nothing is open yet: each thread's first call needs the device. One opens it; the others
  // wait for it and use it.
  fake::setOpenHook([this] { opens_.pass(); });
  std::barrier start(8);
  void *found[8] = {};
  std::vector<std::thread> threads;
  for (void *&mine : found)
    threads.emplace_back([&] {
      start.arrive_and_wait();
      auto lib = loader_.open(image("lib.spv").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
      auto app = lib ? loader_.open(image("app.spv").c_str(), DEVDL_LAZY) : lib.takeError();
      auto kernel = app ? loader_.symbol(*app, "AppKernel") : app.takeError();
      if (kernel) mine = *kernel;
      else ADD_FAILURE() << llvm::toString(kernel.takeError());
    });
  ASSERT_TRUE(opens_.waitFor(1));
  std::this_thread::sleep_for(50ms);  // time for the others to ask for it, not a measure
  EXPECT_EQ(opens_.count(), 1) << "threads opened the device at once";
  opens_.open();
  for (auto &t : threads) t.join();
  EXPECT_EQ(opens_.count(), 1);
  for (void *mine : found) EXPECT_EQ(mine, found[0]);
  EXPECT_NE(found[0], nullptr);
}

TEST_F(LoaderThreads, EveryWaiterGetsTheErrorOfADeviceThatDoesNotOpen) {
  Loader loader{{fake::backendsWithAnAbsentOneFirst(), noStore, "absent"}};
  fake::setOpenHook([this] { opens_.pass(); });
  std::string errors[8];
  std::vector<std::thread> threads;
  for (std::string &mine : errors)
    threads.emplace_back([&] {
      auto app = loader.open(image("app.spv").c_str(), DEVDL_LAZY);
      auto kernel = app ? loader.symbol(*app, "AppKernel") : app.takeError();
      if (kernel) ADD_FAILURE() << "found on a backend without a device";
      else mine = llvm::toString(kernel.takeError());
    });
  ASSERT_TRUE(opens_.waitFor(1));
  std::this_thread::sleep_for(50ms);  // time for the others to ask for it, not a measure
  opens_.open();
  for (auto &t : threads) t.join();
  EXPECT_EQ(opens_.count(), 1);
  EXPECT_NE(errors[0].find("cannot be linked here: no absent device here"), std::string::npos) << errors[0];
  for (const std::string &mine : errors) EXPECT_EQ(mine, errors[0]);
}

TEST_F(LoaderThreads, AHostConstructorNeedingTheDeviceAnotherOpensGoesOnAfterTheBound) {
  // The opener may wait for the host loader's lock (a driver loading its libraries) that the
  // constructor holds: past the bound the constructor's thread opens one of its own. The first
  // published is the one both use.
  Loader loader{{fake::backends(), noStore, "", 100ms}};
  fake::setOpenHook([this] { opens_.pass(); });
  auto [firstFound, inConstructor] = heldThenFromAConstructor(opens_, [&] {
    auto lib = loader.open(image("kernel_lib.spv").c_str(), DEVDL_LAZY);
    return found(lib ? loader.symbol(*lib, "LibKernel") : lib.takeError());
  });
  EXPECT_NE(firstFound, nullptr);
  EXPECT_EQ(firstFound, inConstructor) << "one device, one program";
}

TEST_F(LoaderThreads, AThreadAnswersEveryNameItFoundBeforeWithoutTheLock) {
  // 300 handles (the same bytes at 300 addresses, one program), a kernel looked up in each: once
  // found, each answer is the thread's own, however many there are (64 before).
  const std::string bytes = readFile(image("kernel_lib.spv"));
  std::vector<std::string> copies(300, bytes);
  std::vector<void *> handles, kernels;
  for (const std::string &copy : copies) {
    auto handle = loader_.openMemory(copy.data(), copy.size(), "kernel_lib", DEVDL_LAZY);
    ASSERT_TRUE(!!handle) << llvm::toString(handle.takeError());
    handles.push_back(*handle);
    kernels.push_back(symbol(*handle, "LibKernel"));
  }
  EXPECT_EQ(links().size(), 1u);
  const uint64_t locked = loader_.lookupsUnderLock();
  for (size_t i = 0; i < handles.size(); ++i) EXPECT_EQ(symbol(handles[i], "LibKernel"), kernels[i]);
  EXPECT_EQ(loader_.lookupsUnderLock(), locked) << "answers the thread found before took the lock";
  // A change (a handle closed) makes each take it once again.
  close(handles.back());
  handles.pop_back();
  for (void *handle : handles) EXPECT_NE(symbol(handle, "LibKernel"), nullptr);
  EXPECT_EQ(loader_.lookupsUnderLock(), locked + handles.size());
  for (void *handle : handles) close(handle);
}

TEST_F(LoaderThreads, AHostLibrarysKernelIsAnsweredWithoutTheLockWhileItIsLoaded) {
  // devdl_test_plugin carries app.spv. Through the global scope, its kernel is answered from
  // what the thread found before while that load of the library is there, whatever else the
  // host loads; unloaded, it is looked for again, and is gone.
  open("lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *plugin = dlopen(DEVDL_TEST_PLUGIN, RTLD_NOW | RTLD_GLOBAL);
  ASSERT_NE(plugin, nullptr) << dlerror();
  void *global = *loader_.open(nullptr, DEVDL_LAZY);
  void *kernel = symbol(global, "AppKernel");
  ASSERT_NE(kernel, nullptr);
  uint64_t locked = loader_.lookupsUnderLock();
  EXPECT_EQ(symbol(global, "AppKernel"), kernel);
  void *other = dlopen(DEVDL_TEST_PLAIN, RTLD_NOW | RTLD_GLOBAL);  // no images
  ASSERT_NE(other, nullptr) << dlerror();
  EXPECT_EQ(symbol(global, "AppKernel"), kernel);
  EXPECT_EQ(loader_.lookupsUnderLock(), locked) << "the host loading another object took the lock";
  dlclose(other);
  ASSERT_EQ(dlclose(plugin), 0);
  ASSERT_EQ(dlopen(DEVDL_TEST_PLUGIN, RTLD_NOW | RTLD_NOLOAD), nullptr) << "unloaded";
  auto gone = loader_.symbol(global, "AppKernel");
  ASSERT_FALSE(!!gone) << "the unloaded library's kernel was answered";
  EXPECT_EQ(llvm::toString(gone.takeError()), "the global scope: undefined device symbol `AppKernel`");
  EXPECT_EQ(loader_.lookupsUnderLock(), locked + 1);
}

TEST_F(LoaderThreads, ManyThreadsOpenLookUpAndClose) {
  // Every entry point at once; each thread sees the same kernel object for the same program.
  open("lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = open("app.spv", DEVDL_NOW);
  void *kernel = symbol(app, "AppKernel");
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 50; ++round) {
        if (symbol(app, "AppKernel") != kernel) ++failures;
        const char *names[] = {"chain_base.spv", "chain_mid.spv", "kernel_lib.spv"};
        auto h = loader_.open(image(names[(t + round) % 3]).c_str(), DEVDL_LAZY | (round % 2 ? DEVDL_GLOBAL : 0));
        if (!h) {
          llvm::consumeError(h.takeError());
          ++failures;
          continue;
        }
        auto libKernel = loader_.symbol(*h, "LibKernel");
        if (!libKernel) llvm::consumeError(libKernel.takeError());
        if (llvm::Error err = loader_.close(*h)) {
          llvm::consumeError(std::move(err));
          ++failures;
        }
      }
    });
  for (auto &t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(symbol(app, "AppKernel"), kernel);
}

}  // namespace
}  // namespace devdl::test
