// The loader from many threads over the fake backend (a test double: no device code runs): builds
// run without the loader's lock, one per program at a time, and a lookup of what is linked never
// waits for a build. A link can be held at a gate, to see what other threads do meanwhile. Run
// under ThreadSanitizer by scripts/test.sh --tsan.
#include "unit/loader_fixture.h"

#include "devdl.h"

#include <chrono>
#include <condition_variable>
#include <thread>

namespace devdl::test {
namespace {

using namespace std::chrono_literals;

// Links wait here until the test opens it.
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
    fake::setLinkHook(nullptr);
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

  Gate gate_;
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

TEST_F(LoaderThreads, ABuildHeldPastTheBoundIsNotWaitedForForEver) {
  // The builder may wait for the host loader's lock that the waiter holds (a constructor calling
  // devdl): past the bound the waiter builds on its own. Both get the one program kept.
  Loader loader{{fake::backends(), noStore, "", std::chrono::milliseconds(100)}};
  ASSERT_TRUE(!!loader.open(image("lib.spv").c_str(), DEVDL_LAZY | DEVDL_GLOBAL));
  auto opened = loader.open(image("app.spv").c_str(), DEVDL_LAZY);
  ASSERT_TRUE(!!opened);
  void *app = *opened;
  holdLinks();
  void *firstFound = nullptr, *secondFound = nullptr;
  auto find = [&](void *&found) {
    auto kernel = loader.symbol(app, "AppKernel");
    found = kernel ? *kernel : nullptr;
    if (!kernel) ADD_FAILURE() << llvm::toString(kernel.takeError());
  };
  std::thread first([&] { find(firstFound); });
  ASSERT_TRUE(gate_.waitFor(1));
  std::thread second([&] { find(secondFound); });
  EXPECT_TRUE(gate_.waitFor(2)) << "the second thread waited for ever";
  gate_.open();
  first.join();
  second.join();
  EXPECT_EQ(links().size(), 2u);
  EXPECT_NE(firstFound, nullptr);
  EXPECT_EQ(firstFound, secondFound) << "one program kept";
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
