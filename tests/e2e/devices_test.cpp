// Two OpenCL devices in one process (device_dlview): a handle's view on the second device builds
// for it, with its own kernels and variables, and the default device's programs stay as they are.
// Run by ctest in two configurations, set up before the ICD loader's first call:
//   DEVDL_TEST_DEVICES=pthread    PoCL with two CPU devices of one model (POCL_DEVICES)
//   DEVDL_TEST_DEVICES=layer      the same behind the tests' layer (variables at the driver's
//                                 addresses, as Intel's drivers give them)
//   DEVDL_TEST_DEVICES=platforms  PoCL and Intel's OpenCL CPU runtime: two platforms
// Without either there is one device, and the tests skip saying so.
#include "devdl.h"
#include "e2e/opencl_run.h"
#include "test_images.h"
#include "test_support.h"

#include <cstdlib>
#include <filesystem>
#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

namespace devdl::test {
namespace {

const std::string kConfiguration = [] {
  const char *which = std::getenv("DEVDL_TEST_DEVICES");
  if (!which) return std::string();
  if (std::string_view(which) != "platforms") setenv("POCL_DEVICES", "pthread pthread", 1);
  if (std::string_view(which) == "layer") setenv("OPENCL_LAYERS", DEVDL_TEST_OPENCL_LAYER, 1);
  if (std::string_view(which) == "platforms") setenv("OCL_ICD_VENDORS", DEVDL_TEST_TWO_PLATFORMS_VENDORS, 1);
  setenv("DEVDL_CACHE", "0", 0);  // as ctest gives the other suites (it passes one variable here)
  return std::string(which);
}();

const backend::opencl::Api &cl() { return *backend::opencl::api(); }

std::vector<cl_device_id> programDevices(cl_kernel kernel) {
  cl_program program = nullptr;
  EXPECT_EQ(cl().clGetKernelInfo(kernel, CL_KERNEL_PROGRAM, sizeof program, &program, nullptr), CL_SUCCESS);
  cl_uint count = 0;
  EXPECT_EQ(cl().clGetProgramInfo(program, CL_PROGRAM_NUM_DEVICES, sizeof count, &count, nullptr), CL_SUCCESS);
  std::vector<cl_device_id> devices(count);
  EXPECT_EQ(cl().clGetProgramInfo(program, CL_PROGRAM_DEVICES, count * sizeof(cl_device_id), devices.data(), nullptr),
            CL_SUCCESS);
  return devices;
}

cl_context contextOf(cl_kernel kernel) {
  cl_context context = nullptr;
  EXPECT_EQ(cl().clGetKernelInfo(kernel, CL_KERNEL_CONTEXT, sizeof context, &context, nullptr), CL_SUCCESS);
  return context;
}

class Devices : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kConfiguration.empty())
      GTEST_SKIP() << "one OpenCL device: ctest runs these with two (DEVDL_TEST_DEVICES=pthread or platforms)";
    devdl_native native{};
    native.size = sizeof native;
    native.backend = DEVDL_BACKEND_OPENCL;
    ASSERT_EQ(device_dlnative(&native), 0) << error();
    first_ = static_cast<cl_device_id>(native.device);
    firstContext_ = static_cast<cl_context>(native.context);
    cl_platform_id firstPlatform = static_cast<cl_platform_id>(native.platform);
    // The other device: of the same platform (two of PoCL's), or of the other platform.
    cl_uint count = 0;
    ASSERT_EQ(cl().clGetPlatformIDs(0, nullptr, &count), CL_SUCCESS);
    std::vector<cl_platform_id> platforms(count);
    ASSERT_EQ(cl().clGetPlatformIDs(count, platforms.data(), nullptr), CL_SUCCESS);
    for (cl_platform_id platform : platforms) {
      if ((kConfiguration == "platforms") == (platform == firstPlatform)) continue;
      cl_uint devices = 0;
      if (cl().clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &devices) != CL_SUCCESS) continue;
      std::vector<cl_device_id> ids(devices);
      ASSERT_EQ(cl().clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, devices, ids.data(), nullptr), CL_SUCCESS);
      for (cl_device_id id : ids)
        if (id != first_ && !second_) second_ = id;
    }
    ASSERT_NE(second_, nullptr) << "DEVDL_TEST_DEVICES=" << kConfiguration << ": no second OpenCL device";
    secondNative_ = {sizeof secondNative_, DEVDL_BACKEND_OPENCL, nullptr, second_, nullptr};
  }

  std::string deviceName(cl_device_id device) {
    char name[256] = {};
    cl().clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof name - 1, name, nullptr);
    return name;
  }

  cl_device_id first_ = nullptr, second_ = nullptr;
  cl_context firstContext_ = nullptr;
  devdl_native secondNative_{};
};

constexpr size_t kItems = 16;

// The seed's application on both devices: the view's kernel is of a program built for the second
// device alone, the handle's of one for the first; both compute the same.
TEST_F(Devices, AViewBuildsForItsDeviceAndTheDefaultStaysAsItWas) {
  void *lib = device_dlopen(image("lib.spv").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = device_dlopen(image("app.spv").c_str(), DEVDL_LAZY);
  ASSERT_TRUE(lib && app) << error();
  auto *onFirst = static_cast<cl_kernel>(device_dlsym(app, "AppKernel"));
  ASSERT_NE(onFirst, nullptr) << error();
  void *view = device_dlview(app, &secondNative_);
  ASSERT_NE(view, nullptr) << error();
  EXPECT_NE(view, app);
  EXPECT_EQ(device_dlview(app, &secondNative_), view) << "the same handle and device: the same view";
  EXPECT_EQ(device_dlview(view, &secondNative_), view) << "a view's view is of its handle";
  auto *onSecond = static_cast<cl_kernel>(device_dlsym(view, "AppKernel"));
  ASSERT_NE(onSecond, nullptr) << error();
  EXPECT_NE(onSecond, onFirst);
  EXPECT_EQ(programDevices(onSecond), std::vector<cl_device_id>{second_});
  EXPECT_EQ(programDevices(onFirst), std::vector<cl_device_id>{first_});
  EXPECT_EQ(device_dlsym(app, "AppKernel"), onFirst) << "the handle's kernel is the first device's still";

  const std::vector<int> first = runIntKernel(firstContext_, first_, onFirst, kItems);
  const std::vector<int> second = runIntKernel(contextOf(onSecond), second_, onSecond, kItems);
  ASSERT_EQ(first.size(), kItems);
  EXPECT_NE(first[1], -1) << "the kernel wrote its output";
  EXPECT_EQ(second, first) << deviceName(second_) << " computes what " << deviceName(first_) << " does";

  // The calls that take a handle take the view.
  devdl_symbol_info info{};
  info.size = sizeof info;
  ASSERT_EQ(device_dlsyminfo(view, "AppKernel", &info), 0) << error();
  EXPECT_EQ(info.kind, DEVDL_SYMBOL_KERNEL);
  const char *plan = device_dlplan(view, "AppKernel");
  ASSERT_NE(plan, nullptr) << error();
  EXPECT_NE(std::string(plan).find("lib.spv"), std::string::npos) << plan;
  // Closing a view drops nothing: the handle and its view stay.
  EXPECT_EQ(device_dlclose(view), 0) << error();
  EXPECT_EQ(device_dlsym(view, "AppKernel"), onSecond);
  EXPECT_EQ(device_dlclose(app), 0);
  EXPECT_EQ(device_dlsym(view, "AppKernel"), nullptr) << "a view lives as long as its handle";
  EXPECT_EQ(error(), "invalid handle");
  EXPECT_EQ(device_dlclose(lib), 0);
}

// A view of the global scope's handle, and one with a context of the program's own.
TEST_F(Devices, TheGlobalScopeOnTheSecondDeviceInTheProgramsContext) {
  cl_int err = CL_SUCCESS;
  cl_context mine = cl().clCreateContext(nullptr, 1, &second_, nullptr, nullptr, &err);
  ASSERT_EQ(err, CL_SUCCESS);
  void *lib = device_dlopen(image("lib.spv").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = device_dlopen(image("app.spv").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_TRUE(lib && app) << error();
  devdl_native native = secondNative_;
  native.context = mine;
  void *global = device_dlview(device_dlopen(nullptr, DEVDL_LAZY), &native);
  ASSERT_NE(global, nullptr) << error();
  auto *kernel = static_cast<cl_kernel>(device_dlsym(global, "AppKernel"));
  ASSERT_NE(kernel, nullptr) << error();
  EXPECT_EQ(contextOf(kernel), mine);
  const std::vector<int> expected =
      runIntKernel(firstContext_, first_, static_cast<cl_kernel>(device_dlsym(app, "AppKernel")), kItems);
  EXPECT_EQ(runIntKernel(mine, second_, kernel, kItems), expected);
  EXPECT_EQ(device_dlclose(app), 0);
  EXPECT_EQ(device_dlclose(lib), 0);
  cl().clReleaseContext(mine);
}

// Each device's program has its own instance of a variable: written through the handle and the
// view, each device's kernel reads its own.
TEST_F(Devices, EachDevicesProgramHasItsOwnVariables) {
  void *lib = device_dlopen(image("counter_lib.spv").c_str(), DEVDL_NOW);
  ASSERT_NE(lib, nullptr) << error();
  void *view = device_dlview(lib, &secondNative_);
  ASSERT_NE(view, nullptr) << error();
  const int ten = 10, twenty = 20;
  ASSERT_EQ(device_dlwrite(lib, "SharedCounter", 0, &ten, sizeof ten), 0) << error();
  ASSERT_EQ(device_dlwrite(view, "SharedCounter", 0, &twenty, sizeof twenty), 0) << error();
  int onFirst = 0, onSecond = 0;
  ASSERT_EQ(device_dlread(lib, "SharedCounter", 0, &onFirst, sizeof onFirst), 0) << error();
  ASSERT_EQ(device_dlread(view, "SharedCounter", 0, &onSecond, sizeof onSecond), 0) << error();
  EXPECT_EQ(onFirst, 10);
  EXPECT_EQ(onSecond, 20);
  auto *first = static_cast<cl_kernel>(device_dlsym(lib, "LibCounterKernel"));
  auto *second = static_cast<cl_kernel>(device_dlsym(view, "LibCounterKernel"));
  ASSERT_TRUE(first && second) << error();
  std::vector<int> expectFirst(kItems), expectSecond(kItems);
  for (size_t i = 0; i < kItems; ++i) {
    expectFirst[i] = 10 + static_cast<int>(i);
    expectSecond[i] = 20 + static_cast<int>(i);
  }
  EXPECT_EQ(runIntKernel(firstContext_, first_, first, kItems), expectFirst);
  EXPECT_EQ(runIntKernel(contextOf(second), second_, second, kItems), expectSecond);
  EXPECT_EQ(device_dlclose(lib), 0);
}

// One instance of a library's variable on each device (issue 51): on each, the library's own
// kernel first, then an application linked apart, which reaches that device's instance.
TEST_F(Devices, EachDeviceHasOneInstanceOfALibrarysVariable) {
  void *lib = device_dlopen(image("gstate_lib.spv").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_NE(lib, nullptr) << error();
  void *libView = device_dlview(lib, &secondNative_);
  ASSERT_NE(libView, nullptr) << error();
  auto *setFirst = static_cast<cl_kernel>(device_dlsym(lib, "SetState"));
  auto *setSecond = static_cast<cl_kernel>(device_dlsym(libView, "SetState"));
  ASSERT_TRUE(setFirst && setSecond) << error();
  runIntKernel(firstContext_, first_, setFirst, kItems);  // State = 100 on the first device only
  void *reader = device_dlopen(image("gstate_read.spv").c_str(), DEVDL_NOW);
  ASSERT_NE(reader, nullptr) << error();
  void *readerView = device_dlview(reader, &secondNative_);
  ASSERT_NE(readerView, nullptr) << error();
  auto *first = static_cast<cl_kernel>(device_dlsym(reader, "ReadDirect"));
  auto *second = static_cast<cl_kernel>(device_dlsym(readerView, "ReadDirect"));
  ASSERT_TRUE(first && second) << error();
  std::vector<int> expectFirst(kItems), expectSecond(kItems);
  for (size_t i = 0; i < kItems; ++i) {
    expectFirst[i] = 100 + static_cast<int>(i);
    expectSecond[i] = 5 + static_cast<int>(i);
  }
  EXPECT_EQ(runIntKernel(firstContext_, first_, first, kItems), expectFirst);
  EXPECT_EQ(runIntKernel(contextOf(second), second_, second, kItems), expectSecond);
  runIntKernel(contextOf(setSecond), second_, setSecond, kItems);
  for (size_t i = 0; i < kItems; ++i) expectSecond[i] = 100 + static_cast<int>(i);
  EXPECT_EQ(runIntKernel(contextOf(second), second_, second, kItems), expectSecond);
  EXPECT_EQ(device_dlclose(reader), 0);
  EXPECT_EQ(device_dlclose(lib), 0);
}

// Eight threads, each setting its own arguments on the view's kernel and launching it, again and
// again: each has its own object of the second device's program, and every result is right.
TEST_F(Devices, EightThreadsLaunchTheViewsKernelEachWithItsOwnArguments) {
  void *lib = device_dlopen(image("lib.spv").c_str(), DEVDL_NOW | DEVDL_GLOBAL);
  void *app = device_dlopen(image("app.spv").c_str(), DEVDL_NOW);
  ASSERT_TRUE(lib && app) << error();
  void *view = device_dlview(app, &secondNative_);
  ASSERT_NE(view, nullptr) << error();
  auto *kernel = static_cast<cl_kernel>(device_dlsym(view, "AppKernel"));
  ASSERT_NE(kernel, nullptr) << error();
  cl_context context = contextOf(kernel);
  const std::vector<int> expected =
      runIntKernel(firstContext_, first_, static_cast<cl_kernel>(device_dlsym(app, "AppKernel")), kItems);
  ASSERT_EQ(expected.size(), kItems);
  expectEachThreadLaunchesItsOwnKernel(view, "AppKernel", context, second_, expected, 8, 10);
  EXPECT_EQ(device_dlclose(app), 0);
  EXPECT_EQ(device_dlclose(lib), 0);
}

TEST_F(Devices, AViewOfNothingOrOnNoDeviceIsAnError) {
  void *app = device_dlopen(image("lib.spv").c_str(), DEVDL_LAZY);
  ASSERT_NE(app, nullptr) << error();
  int notAHandle = 0;
  EXPECT_EQ(device_dlview(&notAHandle, &secondNative_), nullptr);
  EXPECT_EQ(error(), "device_dlview: invalid handle");
  EXPECT_EQ(device_dlview(app, nullptr), nullptr);
  EXPECT_EQ(error(), "device_dlview: device is NULL or its size is not set");
  devdl_native none = secondNative_;
  none.device = nullptr;
  EXPECT_EQ(device_dlview(app, &none), nullptr);
  EXPECT_EQ(error(), "device_dlview: no OpenCL device given (its cl_device_id is NULL)");
  devdl_native unknown = secondNative_;
  unknown.backend = 42;
  EXPECT_EQ(device_dlview(app, &unknown), nullptr);
  EXPECT_NE(error().find("device_dlview: backend 42 is not in this build"), std::string::npos);
  // A cl_device_id that is no device (the ICD loader would call through it), with a handle or
  // not: the handle is looked at first, and the device only among those a platform lists.
  uintptr_t garbage[8];
  std::fill(std::begin(garbage), std::end(garbage), uintptr_t(0x5a5a5a5a5a5a5a5a));
  devdl_native bogus = secondNative_;
  bogus.device = garbage;
  bogus.context = nullptr;
  EXPECT_EQ(device_dlview(&notAHandle, &bogus), nullptr);
  EXPECT_EQ(error(), "device_dlview: invalid handle");
  EXPECT_EQ(device_dlview(app, &bogus), nullptr);
  EXPECT_NE(error().find("is no device an OpenCL platform lists"), std::string::npos) << error();
  EXPECT_EQ(device_dlclose(app), 0);
}

// Two devices of one model: the second's program is the first's binary, loaded, never linked
// again: from the disk cache, or without one from the first's program in memory. Said by
// DEVDL_DEBUG=statistics in a process of its own (and by DEVDL_DEBUG=libs, the view's device). Not where devdl places a program's variables in
// host memory (PoCL alone): the binary holds their address, which the first device's program has.
TEST_F(Devices, TheSecondDeviceOfAModelLoadsTheFirstsBinary) {
  if (kConfiguration != "layer")
    GTEST_SKIP() << "two devices of one model whose binaries do not hold their variables' addresses: "
                    "DEVDL_TEST_DEVICES=layer runs it";
  if (std::getenv("DEVDL_TEST_DEVICES_CHILD")) {
    void *lib = device_dlopen(image("lib.spv").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
    void *app = device_dlopen(image("app.spv").c_str(), DEVDL_LAZY);
    ASSERT_TRUE(lib && app) << error();
    // Without the disk cache, the view comes before the first link: the first device's binary is
    // kept for it where another device of its model is in use then. With it, after.
    const bool disk = std::string_view(std::getenv("DEVDL_CACHE")) != "0";
    void *view = disk ? nullptr : device_dlview(app, &secondNative_);
    auto *first = static_cast<cl_kernel>(device_dlsym(app, "AppKernel"));
    if (disk) view = device_dlview(app, &secondNative_);
    ASSERT_NE(view, nullptr) << error();
    auto *second = static_cast<cl_kernel>(device_dlsym(view, "AppKernel"));
    ASSERT_TRUE(first && second) << error();
    EXPECT_EQ(programDevices(second), std::vector<cl_device_id>{second_});
    EXPECT_EQ(runIntKernel(contextOf(second), second_, second, kItems),
              runIntKernel(firstContext_, first_, first, kItems));
    return;
  }
  for (const bool disk : {true, false}) {
    const std::string dir = scratchDir() + "/devices-cache";
    std::filesystem::remove_all(dir);
    setenv("DEVDL_TEST_DEVICES_CHILD", "1", 1);
    setenv("DEVDL_CACHE_DIR", dir.c_str(), 1);
    setenv("DEVDL_DEBUG", "libs,statistics", 1);
    const char *cache = std::getenv("DEVDL_CACHE");
    const std::string saved = cache ? cache : "";
    setenv("DEVDL_CACHE", disk ? "1" : "0", 1);  // set, or the child's setup turns it off
    CommandResult child = run({"/proc/self/exe", "--gtest_filter=Devices.TheSecondDeviceOfAModelLoadsTheFirstsBinary"});
    unsetenv("DEVDL_TEST_DEVICES_CHILD");
    unsetenv("DEVDL_CACHE_DIR");
    unsetenv("DEVDL_DEBUG");
    if (cache) setenv("DEVDL_CACHE", saved.c_str(), 1);
    else unsetenv("DEVDL_CACHE");
    ASSERT_EQ(child.status, 0) << child.out << child.err;
    std::vector<std::string> linked, loaded;
    for (const std::string &line : linesOf(child.err)) {
      if (line.find("app.spv: image 0 (spirv): 2 images") == std::string::npos) continue;
      if (line.find(" linked in ") != std::string::npos) linked.push_back(line);
      if (line.find(" loaded from ") != std::string::npos) loaded.push_back(line);
    }
    ASSERT_EQ(linked.size(), 1u) << child.err;
    ASSERT_EQ(loaded.size(), 1u) << child.err;
    const std::string name = deviceName(first_);
    // The first device is #1 where the second was in use when it linked.
    EXPECT_NE(linked[0].find(" on " + name + (disk ? " (" : " #1 (")), std::string::npos) << linked[0];
    EXPECT_NE(loaded[0].find(disk ? "loaded from the disk cache" : "loaded from the binary linked for " + name + " #1"),
              std::string::npos)
        << loaded[0];
    EXPECT_NE(loaded[0].find(" on " + name + " #2"), std::string::npos) << loaded[0];
    EXPECT_NE(child.err.find("device " + name + " #2 for views"), std::string::npos) << child.err;
  }
}

}  // namespace
}  // namespace devdl::test
