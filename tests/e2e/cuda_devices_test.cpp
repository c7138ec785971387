// Two GPUs in one process (device_dlview), end to end on CUDA: a handle's view on the second GPU
// links for it, each GPU's program with its own variables, both GPUs launching at once, and the
// second GPU's program loaded from the first's binary (one model). Where there are fewer than two
// GPUs the tests skip, saying so: scripts/gpu-run.sh runs them on the project's pair of H100s.
#include "devdl.h"
#include "e2e/cuda_fixture.h"
#include "test_images.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace devdl::test {
namespace {

std::vector<int> times(int factor, int plus, unsigned n) {
  std::vector<int> v;
  for (unsigned i = 0; i < n; ++i) v.push_back(factor * static_cast<int>(i) + plus);
  return v;
}

class TwoGpus : public OnCuda<> {
 protected:
  void SetUp() override {
    OnCuda::SetUp();
    if (notSetUp()) return;
    int count = 0;
    ASSERT_EQ(cu_->cuDeviceGetCount(&count), cuda::CUDA_SUCCESS);
    if (count < 2) GTEST_SKIP() << count << " GPU here: two are needed (scripts/gpu-run.sh on a pair of H100s)";
    first_ = context_;
    const int firstOrdinal = static_cast<int>(reinterpret_cast<intptr_t>(native_.device));
    const int other = firstOrdinal == 0 ? 1 : 0;
    ASSERT_EQ(cu_->cuDevicePrimaryCtxRetain(&second_, other), cuda::CUDA_SUCCESS);
    secondOrdinal_ = other;
    secondNative_ = {sizeof secondNative_, DEVDL_BACKEND_CUDA, nullptr,
                     reinterpret_cast<void *>(static_cast<intptr_t>(other)), nullptr};
  }
  void TearDown() override {
    if (second_) cu_->cuDevicePrimaryCtxRelease(secondOrdinal_);
  }

  cuda::CUcontext first_ = nullptr, second_ = nullptr;  // the second: its primary context, as devdl's view uses
  int secondOrdinal_ = 0;
  devdl_native secondNative_{};
};

TEST_F(TwoGpus, TheSeedExampleOnEachGpuAndBothAtOnce) {
  void *lib = device_dlopen(image("lib.cubin").c_str(), DEVDL_NOW | DEVDL_GLOBAL);
  void *app = device_dlopen(image("app.cubin").c_str(), DEVDL_NOW);
  ASSERT_TRUE(lib && app) << error();
  void *view = device_dlview(app, &secondNative_);
  ASSERT_NE(view, nullptr) << error();
  void *onFirst = device_dlsym(app, "AppKernel");
  void *onSecond = device_dlsym(view, "AppKernel");
  ASSERT_TRUE(onFirst && onSecond) << error();
  EXPECT_NE(onFirst, onSecond) << "a function of each GPU's module";
  EXPECT_EQ(cuda::runIntKernel(*cu_, first_, onFirst, 8), times(2, 0, 8));
  EXPECT_EQ(cuda::runIntKernel(*cu_, second_, onSecond, 8), times(2, 0, 8));
  // Both GPUs at once, each from a thread of its own.
  int wrong = 0, wrongToo = 0;
  std::thread a([&] {
    for (int i = 0; i < 50; ++i) wrong += cuda::runIntKernel(*cu_, first_, device_dlsym(app, "AppKernel"), 64) != times(2, 0, 64);
  });
  std::thread b([&] {
    for (int i = 0; i < 50; ++i)
      wrongToo += cuda::runIntKernel(*cu_, second_, device_dlsym(view, "AppKernel"), 64) != times(2, 0, 64);
  });
  a.join();
  b.join();
  EXPECT_EQ(wrong + wrongToo, 0);
  EXPECT_EQ(device_dlclose(app), 0);
  EXPECT_EQ(device_dlclose(lib), 0);
}

// Each GPU's program has its own instance of the library's variable: written through the view,
// only the second GPU's kernel sees it.
TEST_F(TwoGpus, EachGpusProgramHasItsOwnVariables) {
  void *lib = device_dlopen(image("lib.cubin").c_str(), DEVDL_NOW | DEVDL_GLOBAL);
  void *app = device_dlopen(image("app_counter.cubin").c_str(), DEVDL_NOW);
  ASSERT_TRUE(lib && app) << error();
  void *view = device_dlview(app, &secondNative_);
  ASSERT_NE(view, nullptr) << error();
  const int five = 5;
  ASSERT_EQ(device_dlwrite(view, "LibCounter", 0, &five, sizeof five), 0) << error();
  int onFirst = 0, onSecond = 0;
  ASSERT_EQ(device_dlread(app, "LibCounter", 0, &onFirst, sizeof onFirst), 0) << error();
  ASSERT_EQ(device_dlread(view, "LibCounter", 0, &onSecond, sizeof onSecond), 0) << error();
  EXPECT_EQ(onFirst, 7);  // its initializer in lib.cu
  EXPECT_EQ(onSecond, 5);
  EXPECT_NE(device_dlsym(app, "LibCounter"), nullptr) << error();
  EXPECT_EQ(cuda::runIntKernel(*cu_, first_, device_dlsym(app, "CounterKernel"), 4), times(1, 7, 4));
  EXPECT_EQ(cuda::runIntKernel(*cu_, second_, device_dlsym(view, "CounterKernel"), 4), times(1, 5, 4));
  EXPECT_EQ(device_dlclose(app), 0);
  EXPECT_EQ(device_dlclose(lib), 0);
}

// One model: the second GPU's program is the first's binary loaded, not linked again (in memory
// here, the disk cache being off: the view comes before the first link). Said by
// DEVDL_DEBUG=statistics in a process of its own.
TEST_F(TwoGpus, TheSecondGpuLoadsTheFirstsBinary) {
  if (std::getenv("DEVDL_TEST_TWO_GPUS_CHILD")) {
    void *lib = device_dlopen(image("lib.cubin").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
    void *app = device_dlopen(image("app.cubin").c_str(), DEVDL_LAZY);
    ASSERT_TRUE(lib && app) << error();
    void *view = device_dlview(app, &secondNative_);
    ASSERT_NE(view, nullptr) << error();
    EXPECT_EQ(cuda::runIntKernel(*cu_, first_, device_dlsym(app, "AppKernel"), 8), times(2, 0, 8));
    EXPECT_EQ(cuda::runIntKernel(*cu_, second_, device_dlsym(view, "AppKernel"), 8), times(2, 0, 8));
    return;
  }
  // This program by its path: in the shell's command, /proc/self/exe would be the shell.
  const std::string command = "DEVDL_TEST_TWO_GPUS_CHILD=1 DEVDL_CACHE=0 DEVDL_DEBUG=statistics '" +
                              std::filesystem::read_symlink("/proc/self/exe").string() +
                              "' --gtest_filter=TwoGpus.TheSecondGpuLoadsTheFirstsBinary 2>&1";
  FILE *child = popen(command.c_str(), "r");
  ASSERT_NE(child, nullptr);
  std::string out;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, child)) out.append(buffer, n);
  ASSERT_EQ(pclose(child), 0) << out;
  size_t linked = 0, loaded = 0;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("devdl: program for ") != 0 || line.find("app.cubin: image 0") == std::string::npos) continue;
    linked += line.find(" linked in ") != std::string::npos;
    loaded += line.find(" loaded from the binary linked for ") != std::string::npos;
  }
  EXPECT_EQ(linked, 1u) << out;
  EXPECT_EQ(loaded, 1u) << out;
}

}  // namespace
}  // namespace devdl::test
