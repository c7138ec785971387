// The end-to-end suite (e2e/dlopen_fixture.h) through the disk cache across processes: a test of
// DeviceDlopenProcess runs in processes of its own with the cache on, and says what it found there.
#include "e2e/dlopen_fixture.h"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace devdl::test {
namespace {

// Run by DeviceDlopen.DiskCacheAcrossProcesses, each time in a process of its own.
class DeviceDlopenProcess : public DeviceDlopen {};

TEST_F(DeviceDlopenProcess, DISABLED_SeedExampleThroughTheDiskCache) {
  void *lib = device_dlopen(deviceImage("lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = device_dlopen(deviceImage("app").c_str(), DEVDL_NOW);  // the one link of the program
  ASSERT_TRUE(lib && app) << error();
  EXPECT_EQ(run(device_dlsym(app, "AppKernel"), 8), (std::vector<int>{0, 2, 4, 6, 8, 10, 12, 14}));
  // The program's variable, where the backend gives its address, in a program from the cache too.
  if (!onOpenCl() || usmMemcpy_) {
    EXPECT_NE(device_dlsym(app, "LibCounter"), nullptr) << error();
  }
  device_dlclose(app);
  device_dlclose(lib);
}

// Run by DeviceDlopen.VariablesThroughTheDiskCache, each time in a process of its own: the
// variable's initial value, and what the host writes to it, as the program's kernel reads them.
TEST_F(DeviceDlopenProcess, DISABLED_VariableThroughTheDiskCache) {
  void *lib = device_dlopen(deviceImage("lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = device_dlopen(deviceImage("counter_app").c_str(), DEVDL_NOW);
  ASSERT_TRUE(lib && app) << error();
  void *kernel = device_dlsym(app, "CounterKernel");
  ASSERT_NE(kernel, nullptr) << error();
  EXPECT_EQ(run(kernel, 2), (std::vector<int>{7, 8}));
  const int value = 40;
  ASSERT_EQ(device_dlwrite(app, "LibCounter", 0, &value, sizeof value), 0) << error();
  EXPECT_EQ(run(kernel, 2), (std::vector<int>{40, 41}));
  if (devdlPlacesVariables()) {
    const auto *counter = static_cast<const int *>(device_dlsym(app, "LibCounter"));
    ASSERT_NE(counter, nullptr) << error();
    EXPECT_EQ(*counter, 40) << "its device address is the host's";
  }
  device_dlclose(app);
  device_dlclose(lib);
}

// Run by DeviceDlopen.AKeptKernelThroughTheDiskCache in a process of its own: a kernel the user
// made of a program loaded from the cache and keeps past the close of its handles; opened again,
// the program's entry cannot be loaded while that kernel holds its variables' address, and the
// program is built anew, its variables as they start, the kept kernel's left as they were.
TEST_F(DeviceDlopenProcess, DISABLED_AKeptKernelThroughTheDiskCache) {
  const auto &cl = *backend::opencl::api();
  void *lib = device_dlopen(deviceImage("lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = device_dlopen(deviceImage("counter_app").c_str(), DEVDL_NOW);
  ASSERT_TRUE(lib && app) << error();
  cl_int err = CL_SUCCESS;
  cl_kernel kept = cl.clCreateKernel(programOf(device_dlsym(app, "CounterKernel")), "CounterKernel", &err);
  ASSERT_EQ(err, CL_SUCCESS);
  const int value = 40;
  ASSERT_EQ(device_dlwrite(app, "LibCounter", 0, &value, sizeof value), 0) << error();
  device_dlclose(app);
  device_dlclose(lib);
  lib = device_dlopen(deviceImage("lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  app = device_dlopen(deviceImage("counter_app").c_str(), DEVDL_NOW);
  ASSERT_TRUE(lib && app) << error();
  EXPECT_EQ(run(device_dlsym(app, "CounterKernel"), 2), (std::vector<int>{7, 8}));
  EXPECT_EQ(run(kept, 2), (std::vector<int>{40, 41}));
  device_dlclose(app);
  device_dlclose(lib);
  EXPECT_EQ(run(kept, 2), (std::vector<int>{40, 41})) << "its variables outlive the handles";
  cl.clReleaseKernel(kept);
}

// Run by DeviceDlopen.AnInstanceReachedThroughTheDiskCache, each time in a process of its own:
// the library's own kernel sets State, and an application's program, stored as reaching the
// instance through its cell, reads it, its cell set in this process (issue 51).
TEST_F(DeviceDlopenProcess, DISABLED_InstanceReachedThroughTheDiskCache) {
  void *lib = device_dlopen(deviceImage("gstate_lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_NE(lib, nullptr) << error();
  EXPECT_EQ(run(device_dlsym(lib, "SetState"), 2), (std::vector<int>{0, 1}));
  void *reader = device_dlopen(deviceImage("gstate_read").c_str(), DEVDL_NOW);
  ASSERT_NE(reader, nullptr) << error();
  EXPECT_EQ(run(device_dlsym(reader, "ReadDirect"), 2), (std::vector<int>{100, 101}));
  EXPECT_EQ(run(device_dlsym(reader, "ReadKernel"), 2), (std::vector<int>{100, 101}));
  device_dlclose(reader);
  device_dlclose(lib);
}

// Runs DeviceDlopenProcess.DISABLED_`test` in a process of its own, with the disk cache on in
// `cache` and its statistics on standard error.
CommandResult inAProcessWithTheCache(const std::string &test, const std::string &cache) {
  setenv("DEVDL_CACHE", "1", 1);
  setenv("DEVDL_CACHE_DIR", cache.c_str(), 1);
  setenv("DEVDL_DEBUG", "statistics", 1);
  CommandResult result = devdl::test::run(
      {"/proc/self/exe", "--gtest_also_run_disabled_tests", "--gtest_filter=DeviceDlopenProcess.DISABLED_" + test});
  unsetenv("DEVDL_CACHE");
  unsetenv("DEVDL_CACHE_DIR");
  unsetenv("DEVDL_DEBUG");
  return result;
}

// The disk cache keeps what the backend linked; the next process loads it instead of linking,
// and a damaged entry is deleted and the program linked again.
TEST_F(DeviceDlopen, DiskCacheAcrossProcesses) {
  const std::string cache = scratchDir() + "/cache";
  auto process = [&] { return inAProcessWithTheCache("SeedExampleThroughTheDiskCache", cache); };
  const CommandResult cold = process(), hit = process();
  std::string entry;
  for (const auto &file : std::filesystem::directory_iterator(cache))
    if (file.path().extension() == ".devdl-cache") entry = file.path();
  ASSERT_FALSE(entry.empty()) << "no entry in " << cache;
  std::string bytes = readFile(entry);
  bytes[bytes.size() - 8] ^= 0x20;
  writeFile(entry, bytes);
  const CommandResult damaged = process();
  for (const CommandResult *r : {&cold, &hit, &damaged}) EXPECT_EQ(r->status, 0) << r->out << r->err;
  EXPECT_NE(cold.err.find("cache: 0 hits, 1 misses, 1 stored"), std::string::npos) << cold.err;
  EXPECT_NE(hit.err.find("cache: 1 hits, 0 misses, 0 stored"), std::string::npos) << hit.err;
  EXPECT_EQ(hit.err.find("linked in"), std::string::npos) << "the second process linked again:\n" << hit.err;
  EXPECT_NE(damaged.err.find("cache: 0 hits, 1 misses, 1 stored, 1 bad entries deleted"), std::string::npos)
      << damaged.err;
}

// A program's variables as a program loaded from the disk cache has them: on PoCL, where devdl
// moves them to host memory, at the address its kernels were built for.
TEST_F(DeviceDlopen, VariablesThroughTheDiskCache) {
  const std::string cache = scratchDir() + "/cache";
  auto process = [&] { return inAProcessWithTheCache("VariableThroughTheDiskCache", cache); };
  const CommandResult cold = process(), hit = process();
  for (const CommandResult *r : {&cold, &hit}) EXPECT_EQ(r->status, 0) << r->out << r->err;
  EXPECT_NE(cold.err.find("cache: 0 hits, 1 misses, 1 stored"), std::string::npos) << cold.err;
  EXPECT_NE(hit.err.find("cache: 1 hits, 0 misses, 0 stored"), std::string::npos) << hit.err;
}

// A program that reaches a library's instance in another is stored without the instance's address,
// which differs from process to process: the next process loads it and sets its cell.
TEST_F(DeviceDlopen, AnInstanceReachedThroughTheDiskCache) {
  if (!variablesHaveAddresses() || backend_ == DEVDL_BACKEND_CUDA)
    GTEST_SKIP() << "not on " << deviceWords_ << ": a second program cannot reach the instance there";
  const std::string cache = scratchDir() + "/cache";
  auto process = [&] { return inAProcessWithTheCache("InstanceReachedThroughTheDiskCache", cache); };
  const CommandResult cold = process(), hit = process();
  for (const CommandResult *r : {&cold, &hit}) EXPECT_EQ(r->status, 0) << r->out << r->err;
  EXPECT_NE(cold.err.find("cache: 0 hits, 2 misses, 2 stored"), std::string::npos) << cold.err;
  EXPECT_NE(hit.err.find("cache: 2 hits, 0 misses, 0 stored"), std::string::npos) << hit.err;
}

// A stored program whose variables' address this process cannot give it now is built anew, and
// its entry stays, sound, for the processes that can (DISABLED_AKeptKernelThroughTheDiskCache).
TEST_F(DeviceDlopen, AKeptKernelThroughTheDiskCache) {
  DEVDL_ONLY_ON_OPENCL("a kernel of the user's own holds the program (OpenCL's reference counts)");
  if (!devdlPlacesVariables()) GTEST_SKIP() << "devdl places no variables on " << deviceWords_;
  const std::string cache = scratchDir() + "/cache";
  auto process = [&] { return inAProcessWithTheCache("AKeptKernelThroughTheDiskCache", cache); };
  const CommandResult cold = process(), hit = process();
  for (const CommandResult *r : {&cold, &hit}) EXPECT_EQ(r->status, 0) << r->out << r->err;
  for (const CommandResult *r : {&cold, &hit}) {
    EXPECT_NE(r->err.find("which cannot be mapped in this process: it is taken; kept, the program is built here"),
              std::string::npos)
        << r->err;
    EXPECT_NE(r->err.find(", 0 bad entries deleted"), std::string::npos) << r->err;
  }
  // The second open of each process is a miss (the first open's program holds the address).
  EXPECT_NE(cold.err.find("cache: 0 hits, 2 misses, 1 stored,"), std::string::npos) << cold.err;
  EXPECT_NE(hit.err.find("cache: 1 hits, 1 misses, 0 stored,"), std::string::npos)
      << "the program built anew is not stored:\n" << hit.err;
  size_t entries = 0;
  for (const auto &file : std::filesystem::directory_iterator(cache))
    entries += file.path().extension() == ".devdl-cache";
  EXPECT_EQ(entries, 1u);
}

}  // namespace
}  // namespace devdl::test
