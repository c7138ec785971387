// The kernel tables: one object for one name (CUDA), or one for each thread that asks (OpenCL,
// Level Zero), released with the table or when the thread ends.
#include "backend/kernel_table.h"
#include "test_support.h"

#include <atomic>
#include <mutex>
#include <thread>

namespace devdl::test {
namespace {

using backend::ThreadKernelTable;

// Kernels are numbers here, as pointers: make() gives the next; release() records what it is given.
struct Kernels {
  std::atomic<intptr_t> made{0};
  std::mutex mutex;
  std::vector<int> released;
  std::function<llvm::Expected<void *>()> make() {
    return [this]() -> llvm::Expected<void *> { return reinterpret_cast<void *>(++made); };
  }
  std::function<void(void *)> release() {
    return [this](void *kernel) {
      std::lock_guard lock(mutex);
      released.push_back(static_cast<int>(reinterpret_cast<intptr_t>(kernel)));
    };
  }
  std::vector<int> releasedSorted() {
    std::lock_guard lock(mutex);
    std::vector<int> sorted = released;
    std::sort(sorted.begin(), sorted.end());
    return sorted;
  }
};

int kernelOf(llvm::Expected<void *> got) {
  if (!got) {
    ADD_FAILURE() << llvm::toString(got.takeError());
    return -1;
  }
  return static_cast<int>(reinterpret_cast<intptr_t>(*got));
}

TEST(ThreadKernelTable, AThreadGetsItsOwnKernelForANameAndKeepsIt) {
  Kernels kernels;
  auto table = std::make_unique<ThreadKernelTable<void *>>(kernels.release());
  auto make = kernels.make();
  const int first = kernelOf(table->get("K", make));
  EXPECT_EQ(kernelOf(table->get("K", make)), first) << "the same thread, the same object";
  const int other = kernelOf(table->get("L", make));
  EXPECT_NE(other, first) << "another name, another object";
  int theirs = 0;
  std::thread([&] { theirs = kernelOf(table->get("K", make)); }).join();
  EXPECT_NE(theirs, first) << "another thread, another object";
  EXPECT_EQ(kernels.releasedSorted(), std::vector<int>{theirs}) << "released as its thread ended";
  table.reset();
  EXPECT_EQ(kernels.releasedSorted(), (std::vector<int>{first, other, theirs})) << "the rest with the table";
}

TEST(ThreadKernelTable, AThreadEndingAfterTheTableReleasesNothingTwice) {
  Kernels kernels;
  auto table = std::make_unique<ThreadKernelTable<void *>>(kernels.release());
  auto make = kernels.make();
  std::mutex step;
  std::unique_lock hold(step);
  std::atomic<bool> made{false};
  std::thread thread([&] {
    kernelOf(table->get("K", make));
    made = true;
    std::lock_guard wait(step);  // ends once the table is gone
  });
  while (!made) std::this_thread::yield();
  table.reset();
  EXPECT_EQ(kernels.releasedSorted(), std::vector<int>{1});
  hold.unlock();
  thread.join();
  EXPECT_EQ(kernels.releasedSorted(), std::vector<int>{1}) << "released once, with the table";
}

TEST(ThreadKernelTable, AFailedMakeIsTheCallersErrorAndKeepsNothing) {
  Kernels kernels;
  ThreadKernelTable<void *> table(kernels.release());
  auto failing = [&]() -> llvm::Expected<void *> { return fail(ErrorCode::NotFound, "kernel `K`: no such kernel"); };
  auto got = table.get("K", failing);
  ASSERT_FALSE(!!got);
  EXPECT_EQ(llvm::toString(got.takeError()), "kernel `K`: no such kernel");
  auto make = kernels.make();
  EXPECT_EQ(kernelOf(table.get("K", make)), 1) << "made at the next request";
}

}  // namespace
}  // namespace devdl::test
