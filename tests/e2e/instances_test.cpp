// The end-to-end suite (e2e/dlopen_fixture.h): one instance of a library's variables on a device,
// as ld.so maps a library's data once (issue 51). gstate_lib's State (5) is bumped by
// gstate_bump's kernel through the library's BumpState, and read by gstate_read's kernels
// through ReadState and as an imported variable, by the library's own kernels, and by the host,
// whichever program was linked first. gstatic_lib's static Count likewise, through its functions.
#include "e2e/dlopen_fixture.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace devdl::test {
namespace {

class Instances : public DeviceDlopen {
 protected:
  // State as device_dlread reads it through `handle`; -1 where it fails.
  int state(void *handle) {
    int value = -1;
    EXPECT_EQ(device_dlread(handle, "State", 0, &value, sizeof value), 0) << error();
    return value;
  }
  // State + i for i < 2, as `kernel` of `handle` computes it.
  std::vector<int> read(void *handle, const char *kernel) {
    void *found = device_dlsym(handle, kernel);
    EXPECT_NE(found, nullptr) << kernel << ": " << error();
    return found ? run(found, 2) : std::vector<int>{};
  }
  void bump(void *app) {
    void *kernel = device_dlsym(app, "BumpKernel");
    ASSERT_NE(kernel, nullptr) << error();
    EXPECT_EQ(run(kernel, 1), std::vector<int>{0});
  }
  // Where the device gives no variables' addresses, or the images are cubins of machine code
  // alone (the suite's on CUDA: devdl rewrites PTX, not SASS), a second program cannot reach the
  // instance: the open fails naming the variable, both programs and what would do. CUDA's PTX,
  // fat binaries and LTO-IR: devdl_cuda_tests (Cuda.OneInstance*).
  bool reachable() const { return variablesHaveAddresses() && backend_ != DEVDL_BACKEND_CUDA; }
  void expectUnreachable(const char *name) {
    EXPECT_EQ(device_dlopen(deviceImage(name).c_str(), DEVDL_NOW), nullptr);
    const std::string why = error();
    EXPECT_NE(why.find("`State` of " + where("gstate_lib") + " has its instance on"), std::string::npos) << why;
    EXPECT_NE(why.find("which the program of " + where(name) + " cannot reach"), std::string::npos) << why;
  }
};

TEST_F(Instances, TwoApplicationsLinkedApartReachTheLibrarysOneVariable) {
  void *lib = device_dlopen(deviceImage("gstate_lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  void *bumper = device_dlopen(deviceImage("gstate_bump").c_str(), DEVDL_NOW);
  ASSERT_TRUE(lib && bumper) << error();
  if (!reachable()) {
    expectUnreachable("gstate_read");
    closeAll({bumper, lib});
    return;
  }
  void *reader = device_dlopen(deviceImage("gstate_read").c_str(), DEVDL_NOW);
  ASSERT_NE(reader, nullptr) << error();
  bump(bumper);
  EXPECT_EQ(read(reader, "ReadKernel"), (std::vector<int>{6, 7})) << "through the library's function";
  EXPECT_EQ(read(reader, "ReadDirect"), (std::vector<int>{6, 7})) << "as the variable it imports";
  EXPECT_EQ(read(lib, "LibReadState"), (std::vector<int>{6, 7})) << "the library's own kernel";
  EXPECT_EQ(state(reader), 6);
  EXPECT_EQ(state(lib), 6);
  EXPECT_EQ(device_dlsym(reader, "State"), device_dlsym(lib, "State"));
  const int forty = 40;
  ASSERT_EQ(device_dlwrite(reader, "State", 0, &forty, sizeof forty), 0) << error();
  EXPECT_EQ(read(reader, "ReadKernel"), (std::vector<int>{40, 41}));
  bump(bumper);
  EXPECT_EQ(read(reader, "ReadDirect"), (std::vector<int>{41, 42}));
  // Closing an application leaves the library's instance, though its program holds it.
  device_dlclose(bumper);
  EXPECT_EQ(read(reader, "ReadKernel"), (std::vector<int>{41, 42}));
  void *again = device_dlopen(deviceImage("gstate_bump").c_str(), DEVDL_NOW);
  ASSERT_NE(again, nullptr) << error();
  bump(again);
  EXPECT_EQ(read(reader, "ReadDirect"), (std::vector<int>{42, 43}));
  EXPECT_EQ(state(lib), 42);
  closeAll({again, reader, lib});
}

TEST_F(Instances, TheLibrarysOwnKernelFirstThenAnApplication) {
  void *lib = device_dlopen(deviceImage("gstate_lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_NE(lib, nullptr) << error();
  EXPECT_EQ(read(lib, "SetState"), (std::vector<int>{0, 1}));
  EXPECT_EQ(state(lib), 100);
  if (!reachable()) {
    expectUnreachable("gstate_read");
    closeAll({lib});
    return;
  }
  void *reader = device_dlopen(deviceImage("gstate_read").c_str(), DEVDL_NOW);
  ASSERT_NE(reader, nullptr) << error();
  EXPECT_EQ(read(reader, "ReadKernel"), (std::vector<int>{100, 101}));
  EXPECT_EQ(read(reader, "ReadDirect"), (std::vector<int>{100, 101}));
  closeAll({reader, lib});
}

// The mirror image: the applications first, then the library's own kernel.
TEST_F(Instances, ApplicationsFirstThenTheLibrarysOwnKernel) {
  void *lib = device_dlopen(deviceImage("gstate_lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  void *reader = device_dlopen(deviceImage("gstate_read").c_str(), DEVDL_NOW);
  ASSERT_TRUE(lib && reader) << error();
  EXPECT_EQ(read(reader, "ReadKernel"), (std::vector<int>{5, 6}));
  if (!reachable()) {
    expectUnreachable("gstate_bump");
    closeAll({reader, lib});
    return;
  }
  void *bumper = device_dlopen(deviceImage("gstate_bump").c_str(), DEVDL_NOW);
  ASSERT_NE(bumper, nullptr) << error();
  bump(bumper);
  EXPECT_EQ(read(lib, "LibReadState"), (std::vector<int>{6, 7}));
  EXPECT_EQ(read(lib, "SetState"), (std::vector<int>{0, 1}));
  EXPECT_EQ(read(reader, "ReadDirect"), (std::vector<int>{100, 101}));
  closeAll({bumper, reader, lib});
}

// Closing the library (its last reference) ends its instance: opened again, it starts from its
// initializer, though a program that reached the old one lived past the close.
TEST_F(Instances, ClosingTheLibraryEndsItsInstance) {
  if (!reachable())
    GTEST_SKIP() << "not on " << deviceWords_ << ": a second program cannot reach the instance there "
                 << "(TwoApplicationsLinkedApartReachTheLibrarysOneVariable checks the error)";
  void *lib = device_dlopen(deviceImage("gstate_lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  void *bumper = device_dlopen(deviceImage("gstate_bump").c_str(), DEVDL_NOW);
  void *reader = device_dlopen(deviceImage("gstate_read").c_str(), DEVDL_NOW);
  ASSERT_TRUE(lib && bumper && reader) << error();
  bump(bumper);
  device_dlclose(lib);  // its images stay with the programs linked from them
  bump(bumper);
  EXPECT_EQ(read(reader, "ReadDirect"), (std::vector<int>{7, 8})) << "the instance lives while programs reach it";
  closeAll({bumper, reader});
  lib = device_dlopen(deviceImage("gstate_lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  reader = device_dlopen(deviceImage("gstate_read").c_str(), DEVDL_NOW);
  ASSERT_TRUE(lib && reader) << error();
  EXPECT_EQ(state(lib), 5);
  EXPECT_EQ(read(reader, "ReadKernel"), (std::vector<int>{5, 6}));
  closeAll({reader, lib});
}

// Eight threads whose first uses of two applications of one library coincide: whichever program
// is linked first, both applications reach one instance.
TEST_F(Instances, EightThreadsFirstUsesOfTwoApplicationsReachOneInstance) {
  void *lib = device_dlopen(deviceImage("gstate_lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  void *bumper = device_dlopen(deviceImage("gstate_bump").c_str(), DEVDL_LAZY);
  void *reader = device_dlopen(deviceImage("gstate_read").c_str(), DEVDL_LAZY);
  ASSERT_TRUE(lib && bumper && reader) << error();
  std::atomic<int> waiting{8};
  void *found[8] = {};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      for (--waiting; waiting.load() > 0;) std::this_thread::yield();  // all look up at once
      found[i] = device_dlsym(i % 2 ? reader : bumper, i % 2 ? "ReadDirect" : "BumpKernel");
    });
  for (std::thread &thread : threads) thread.join();
  for (void *kernel : found) EXPECT_NE(kernel, nullptr);
  bump(bumper);
  EXPECT_EQ(read(reader, "ReadDirect"), (std::vector<int>{6, 7}));
  EXPECT_EQ(read(reader, "ReadKernel"), (std::vector<int>{6, 7}));
  EXPECT_EQ(state(lib), 6);
  closeAll({reader, bumper, lib});
}

// A variable the library keeps to itself (gstatic_lib's static Count, 5) has one instance too,
// reached by the library's own kernels and, through its functions, by every application: the
// library's kernel first, then the applications.
TEST_F(Instances, ALibrarysStaticHasOneInstanceItsOwnKernelFirst) {
  void *lib = device_dlopen(deviceImage("gstatic_lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_NE(lib, nullptr) << error();
  EXPECT_EQ(read(lib, "SetCount"), (std::vector<int>{0, 1}));
  if (!reachable()) {
    EXPECT_EQ(device_dlopen(deviceImage("gstatic_read").c_str(), DEVDL_NOW), nullptr);
    const std::string why = error();
    // By its name in the image (nvcc's is unique to the file: `__nv_static_..._Count`).
    EXPECT_NE(why.find("Count` of " + where("gstatic_lib") + " has its instance on"), std::string::npos) << why;
    EXPECT_NE(why.find("which the program of " + where("gstatic_read") + " cannot reach"), std::string::npos) << why;
    closeAll({lib});
    return;
  }
  void *reader = device_dlopen(deviceImage("gstatic_read").c_str(), DEVDL_NOW);
  void *bumper = device_dlopen(deviceImage("gstatic_bump").c_str(), DEVDL_NOW);
  ASSERT_TRUE(reader && bumper) << error();
  EXPECT_EQ(read(reader, "ReadCountKernel"), (std::vector<int>{100, 101}));
  EXPECT_EQ(read(bumper, "BumpCountKernel"), (std::vector<int>{0, 1}));
  EXPECT_EQ(read(reader, "ReadCountKernel"), (std::vector<int>{101, 102}));
  EXPECT_EQ(read(lib, "LibReadCount"), (std::vector<int>{101, 102}));
  // Closed and opened again, the library starts from its initializer.
  closeAll({bumper, reader, lib});
  lib = device_dlopen(deviceImage("gstatic_lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  reader = device_dlopen(deviceImage("gstatic_read").c_str(), DEVDL_NOW);
  ASSERT_TRUE(lib && reader) << error();
  EXPECT_EQ(read(reader, "ReadCountKernel"), (std::vector<int>{5, 6}));
  closeAll({reader, lib});
}

// The mirror image: two applications linked apart first, then the library's own kernels.
TEST_F(Instances, ALibrarysStaticHasOneInstanceApplicationsFirst) {
  void *lib = device_dlopen(deviceImage("gstatic_lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  void *bumper = device_dlopen(deviceImage("gstatic_bump").c_str(), DEVDL_NOW);
  ASSERT_TRUE(lib && bumper) << error();
  EXPECT_EQ(read(bumper, "BumpCountKernel"), (std::vector<int>{0, 1}));
  if (!reachable()) {
    EXPECT_EQ(device_dlopen(deviceImage("gstatic_read").c_str(), DEVDL_NOW), nullptr);
    EXPECT_NE(error().find("Count` of " + where("gstatic_lib") + " has its instance on"), std::string::npos);
    closeAll({bumper, lib});
    return;
  }
  void *reader = device_dlopen(deviceImage("gstatic_read").c_str(), DEVDL_NOW);
  ASSERT_NE(reader, nullptr) << error();
  EXPECT_EQ(read(reader, "ReadCountKernel"), (std::vector<int>{6, 7}));
  EXPECT_EQ(read(lib, "LibReadCount"), (std::vector<int>{6, 7}));
  EXPECT_EQ(read(lib, "SetCount"), (std::vector<int>{0, 1}));
  EXPECT_EQ(read(reader, "ReadCountKernel"), (std::vector<int>{100, 101}));
  EXPECT_EQ(read(bumper, "BumpCountKernel"), (std::vector<int>{0, 1}));
  EXPECT_EQ(read(lib, "LibReadCount"), (std::vector<int>{101, 102}));
  closeAll({reader, bumper, lib});
}

}  // namespace
}  // namespace devdl::test
