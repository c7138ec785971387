// The end-to-end suite (e2e/dlopen_fixture.h): device variables as the host reads and writes them
// and the kernels see them: by name, interposed or not, at their device addresses, past the close
// of their handle; device globals and specialization constants by the host objects registered for
// them (seed 002), and specialization constants by SpecId.
#include "e2e/dlopen_fixture.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace devdl::test {
namespace {

// A variable is interposed as a function is: interpose_var_app's Level is interpose_var_first's,
// first in search order, and interpose_var_other's Base keeps its own (1).
TEST_F(DeviceDlopen, AnInterposedVariableIsTheOneTheHostReadsAndWrites) {
  expectTheExportedLevel({"interpose_var_first", "interpose_var_other"}, "interpose_var_app", "LevelKernel",
                         {1120, 1121}, {1150, 1151});
}

// The interposed library's own Level, which its Base keeps using (-Bsymbolic), has one instance:
// written through the library's handle, the application's kernel sees it through Base (issue 51).
TEST_F(DeviceDlopen, AnInterposedLibrarysOwnVariableHasOneInstance) {
  DEVDL_ONLY_ON_SPIRV("the suite's CUDA images are cubins, whose interposed variable devdl cannot edit to reach "
                      "(CudaInstances.TheInterposedLibrarysOwnVariable* checks PTX and fat binaries)");
  if (!variablesHaveAddresses()) GTEST_SKIP() << "not on " << deviceWords_ << ": it gives no variables' addresses";
  auto libs = openAll({"interpose_var_first", "interpose_var_other"}, DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = device_dlopen(deviceImage("interpose_var_app").c_str(), DEVDL_NOW);
  ASSERT_NE(app, nullptr) << error();
  void *kernel = device_dlsym(app, "LevelKernel");
  ASSERT_NE(kernel, nullptr) << error();
  EXPECT_EQ(run(kernel, 2), (std::vector<int>{1120, 1121}));
  int own = 0;
  ASSERT_EQ(device_dlread(libs[1], "Level", 0, &own, sizeof own), 0) << error();
  EXPECT_EQ(own, 1) << "interpose_var_other's own";
  own = 3;
  ASSERT_EQ(device_dlwrite(libs[1], "Level", 0, &own, sizeof own), 0) << error();
  EXPECT_EQ(run(kernel, 2), (std::vector<int>{1320, 1321})) << "Base reads the library's one instance";
  device_dlclose(app);
  for (void *lib : libs) EXPECT_EQ(device_dlclose(lib), 0);
}

// Nor is a library's static variable of the same name (9) what the host reads by the name.
TEST_F(DeviceDlopen, AStaticVariableOfTheSameNameIsNotTheOneTheHostReads) {
  expectTheExportedLevel({"interpose_var_first", "static_var_lib"}, "static_var_app", "StaticKernel",
                         {1920, 1921}, {1950, 1951});
}

// A kernel the user made of a program and keeps past the close of its handle still runs, its
// program's variables where its code looks for them: the driver keeps the program, and devdl the
// variables' memory.
TEST_F(DeviceDlopen, AKernelKeptPastTheCloseStillHasItsVariables) {
  DEVDL_ONLY_ON_OPENCL("a kernel of the user's own holds the program (OpenCL's reference counts)");
  void *lib = device_dlopen(deviceImage("lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = device_dlopen(deviceImage("counter_app").c_str(), DEVDL_NOW);
  ASSERT_TRUE(lib && app) << error();
  auto *devdlKernel = static_cast<cl_kernel>(device_dlsym(app, "CounterKernel"));
  ASSERT_NE(devdlKernel, nullptr) << error();
  const auto &cl = *backend::opencl::api();
  cl_program program = nullptr;
  ASSERT_EQ(cl.clGetKernelInfo(devdlKernel, CL_KERNEL_PROGRAM, sizeof program, &program, nullptr), CL_SUCCESS);
  cl_int err = CL_SUCCESS;
  cl_kernel kernel = cl.clCreateKernel(program, "CounterKernel", &err);
  ASSERT_EQ(err, CL_SUCCESS);
  device_dlclose(app);
  device_dlclose(lib);
  EXPECT_EQ(run(kernel, 2), (std::vector<int>{7, 8}));
  cl.clReleaseKernel(kernel);
  // Opened again, the program is linked again, its variables as they start.
  lib = device_dlopen(deviceImage("lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  app = device_dlopen(deviceImage("counter_app").c_str(), DEVDL_NOW);
  ASSERT_TRUE(lib && app) << error();
  EXPECT_EQ(run(device_dlsym(app, "CounterKernel"), 2), (std::vector<int>{7, 8}));
  device_dlclose(app);
  device_dlclose(lib);
}

// A variable's device address, where the backend gives one: through the handle of the application
// that imports it, the instance its kernels read, which the library's handle gives too; written
// from the host, read by the kernel.
TEST_F(DeviceDlopen, VariablesHaveDeviceAddresses) {
  if (!variablesHaveAddresses())
    GTEST_SKIP() << "not on " << deviceWords_ << ": it gives no variables' addresses, and devdl "
                 << "places variables in host memory only on CPU devices it translates SPIR for";
  void *lib = device_dlopen(deviceImage("lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = device_dlopen(deviceImage("counter_app").c_str(), DEVDL_LAZY);
  ASSERT_TRUE(lib && app) << error();
  void *counter = device_dlsym(app, "LibCounter");
  ASSERT_NE(counter, nullptr) << error();
  void *kernel = device_dlsym(app, "CounterKernel");
  ASSERT_NE(kernel, nullptr) << error();
  EXPECT_EQ(device_dlsym(lib, "LibCounter"), counter);
  EXPECT_EQ(readInt(counter), 7) << "LibCounter's initial value";
  writeInt(counter, 40);
  EXPECT_EQ(run(kernel, 4), (std::vector<int>{40, 41, 42, 43}));
  device_dlclose(app);
  device_dlclose(lib);
}

// device_dladdr names the variable an address lies in, as dladdr names a host object's symbol:
// the address another variable holds (filled in by the device's loader, or by devdl where it
// placed them in host memory), and one inside a variable; none once the program is released.
TEST_F(DeviceDlopen, DladdrNamesTheVariableAnAddressLiesIn) {
  if (!variablesHaveAddresses())
    GTEST_SKIP() << "not on " << deviceWords_ << ": it gives no variables' addresses, and devdl "
                 << "places variables in host memory only on CPU devices it translates SPIR for";
  void *handle = device_dlopen(deviceImage("pointer_var").c_str(), DEVDL_NOW);
  ASSERT_NE(handle, nullptr) << error();
  void *held = nullptr;
  ASSERT_EQ(device_dlread(handle, "Pointer", 0, &held, sizeof held), 0) << error();
  devdl_addr_info info{};
  info.size = sizeof info;
  ASSERT_NE(device_dladdr(held, &info), 0) << error();
  EXPECT_EQ(std::string(info.symbol), "Target");
  EXPECT_EQ(std::string(info.file), deviceImage("pointer_var"));
  EXPECT_EQ(info.image, 0u);
  EXPECT_EQ(info.kind, DEVDL_SYMBOL_VARIABLE);
  EXPECT_EQ(info.offset, 0u);
  EXPECT_EQ(info.symbol_address, device_dlsym(handle, "Target"));
  void *pointer = device_dlsym(handle, "Pointer");
  ASSERT_NE(device_dladdr(static_cast<char *>(pointer) + 3, &info), 0) << error();
  EXPECT_EQ(std::string(info.symbol), "Pointer");
  EXPECT_EQ(info.offset, 3u);
  EXPECT_EQ(info.symbol_address, pointer);
  int local = 0;
  EXPECT_EQ(device_dladdr(&local, &info), 0);
  EXPECT_NE(error().find("is in no variable of a loaded program, nor a function's start"), std::string::npos);
  EXPECT_EQ(device_dlclose(handle), 0) << error();
  EXPECT_EQ(device_dladdr(held, &info), 0) << "its program released with the handle";
}

// A variable whose initializer holds another's address points at the instance of the other that
// the host writes: filled in by the device's loader, or on PoCL, where devdl moves both to host
// memory, by devdl (a relocation in the region).
TEST_F(DeviceDlopen, AVariableInitializedWithAnAddressPointsAtTheInstanceTheHostWrites) {
  void *handle = device_dlopen(deviceImage("pointer_var").c_str(), DEVDL_NOW);
  ASSERT_NE(handle, nullptr) << error();
  void *kernel = device_dlsym(handle, "PointerKernel");
  ASSERT_NE(kernel, nullptr) << error();
  EXPECT_EQ(run(kernel, 2), (std::vector<int>{10, 11}));
  const int value = 40;
  ASSERT_EQ(device_dlwrite(handle, "Target", 0, &value, sizeof value), 0) << error();
  EXPECT_EQ(run(kernel, 2), (std::vector<int>{80, 81})) << "the same instance by name and through the pointer";
  void *pointer = nullptr;
  ASSERT_EQ(device_dlread(handle, "Pointer", 0, &pointer, sizeof pointer), 0) << error();
  void *target = device_dlsym(handle, "Target");
  if (target || !onOpenCl()) {
    EXPECT_EQ(pointer, target) << error();
  }
  if (variablesHaveAddresses()) {
    EXPECT_NE(device_dlsym(handle, "Pointer"), nullptr) << "an address of its own too: " << error();
  }
  device_dlclose(handle);
}

// Device globals by name and by the host address registered for them (seed 002): written from
// the host, read by the library's kernel and by the application's, which share the program, and
// read back. The errors name the object and say what is missing.
TEST_F(DeviceDlopen, DeviceGlobalsReadAndWrittenByNameAndByHostAddress) {
  static int counter;  // the host object, registered as uid_counter (SharedCounter's in counter-global)
  device_dlregister(&counter, "uid_counter", "device_global");
  const std::string global = image("counter-global" + extension_ + ".devdl");
  void *lib = device_dlopen(global.c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  void *user = device_dlopen(deviceImage("counter_user").c_str(), DEVDL_LAZY);
  ASSERT_TRUE(lib && user) << error();
  void *userKernel = device_dlsym(user, "UserCounterKernel");
  void *libKernel = device_dlsym(lib, "LibCounterKernel");
  ASSERT_TRUE(userKernel && libKernel) << error();
  int value = 0;
  ASSERT_EQ(device_dlread_object(user, &counter, 0, &value, sizeof value), 0) << error();
  EXPECT_EQ(value, 3) << "SharedCounter's initial value";
  value = 40;
  ASSERT_EQ(device_dlwrite_object(user, &counter, 0, &value, sizeof value), 0) << error();
  value = 0;
  ASSERT_EQ(device_dlread(lib, "SharedCounter", 0, &value, sizeof value), 0) << error();
  EXPECT_EQ(value, 40);
  // What the kernels see of it, where the program's kernels have one instance: where devdl moved
  // the variables to host memory, or the driver gives one.
  const bool shared = variablesHaveAddresses() || openClKernelsShareProgramVariables();
  if (shared) {
    EXPECT_EQ(run(userKernel, 3), (std::vector<int>{80, 81, 82}));
    EXPECT_EQ(run(libKernel, 3), (std::vector<int>{40, 41, 42})) << "one instance: the library's kernel sees it too";
    value = 7;
    ASSERT_EQ(device_dlwrite(user, "SharedCounter", 0, &value, sizeof value), 0) << error();
    EXPECT_EQ(run(libKernel, 2), (std::vector<int>{7, 8}));
  }

  char at[32];
  int other = 0;
  std::snprintf(at, sizeof at, "%p", static_cast<void *>(&other));
  EXPECT_NE(device_dlread_object(user, &other, 0, &value, sizeof value), 0);
  EXPECT_EQ(error(), "device_dlread_object: no host object is registered at " + std::string(at) +
                         " (__register_uniquely_identifiable_object, device_dlregister)");
  device_dlregister(&other, "uid_nowhere", "device_global");
  EXPECT_NE(device_dlwrite_object(user, &other, 0, &value, sizeof value), 0);
  EXPECT_EQ(error(), "device_dlwrite_object: the device_global `uid_nowhere` registered at " + std::string(at) +
                         " is defined by no image in the scope of " + deviceImage("counter_user"));
  device_dlregister(&other, "uid_counter", "specialization_id");
  EXPECT_NE(device_dlread_object(user, &other, 0, &value, sizeof value), 0);
  EXPECT_EQ(error(), "device_dlread_object: the object at " + std::string(at) +
                         ", `uid_counter`, is a specialization_id, not a device_global");
  EXPECT_NE(device_dlread_object(user, &counter, 2, &value, sizeof value), 0);
  EXPECT_EQ(error(), "device_dlread_object: the device global `SharedCounter` has 4 bytes: 4 at offset 2 are "
                     "outside it");
  device_dlclose(user);
  device_dlclose(lib);
  if (!shared)
    GTEST_SKIP() << "the copies are checked, not what the kernels see: " << deviceWords_
                 << " gives each kernel a copy of its own of a program's variables (an OpenCL C program built from "
                    "source shows it: one kernel's write is not what another reads)";
}

// Registrations a host library's constructor makes are found, and leave with the library.
TEST_F(DeviceDlopen, HostObjectsRegisteredByAHostLibraryLeaveWithIt) {
  DEVDL_ONLY_ON_SPIRV("the host library registering objects is not on the GPU machine");
  void *objects = dlopen(DEVDL_TEST_OBJECTS, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(objects, nullptr) << dlerror();
  void *counter = dlsym(objects, "devdl_test_counter");
  ASSERT_NE(counter, nullptr) << dlerror();
  void *lib = device_dlopen(image("counter-global" + extension_ + ".devdl").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_NE(lib, nullptr) << error();
  int value = 12;
  ASSERT_EQ(device_dlwrite_object(lib, counter, 0, &value, sizeof value), 0) << error();
  value = 0;
  ASSERT_EQ(device_dlread_object(lib, counter, 0, &value, sizeof value), 0) << error();
  EXPECT_EQ(value, 12);
  ASSERT_EQ(dlclose(objects), 0);
  ASSERT_EQ(dlopen(DEVDL_TEST_OBJECTS, RTLD_NOW | RTLD_NOLOAD), nullptr) << "the library is unloaded";
  EXPECT_NE(device_dlread_object(lib, counter, 0, &value, sizeof value), 0);
  EXPECT_NE(error().find("no host object is registered at"), std::string::npos) << "left with the library";
  device_dlclose(lib);
}

TEST_F(DeviceDlopen, SpecializationConstantsSetForTheProgramsLinkedAfter) {
  DEVDL_ONLY_ON_SPIRV("CUDA has no specialization constants");
  void *handle = device_dlopen(image("spec_kernel.spv").c_str(), DEVDL_LAZY);
  ASSERT_NE(handle, nullptr) << error();
  void *defaults = device_dlsym(handle, "SpecKernel");
  ASSERT_NE(defaults, nullptr) << error();
  EXPECT_EQ(run(defaults, 4), (std::vector<int>{5, 8, 11, 14}));  // i * 3 + 5
  const uint32_t scale = 10, offset = 1;
  ASSERT_EQ(device_dlspecialize(handle, 3, &scale, sizeof scale), 0) << error();
  ASSERT_EQ(device_dlspecialize(handle, 7, &offset, sizeof offset), 0) << error();
  void *specialized = device_dlsym(handle, "SpecKernel");
  ASSERT_NE(specialized, nullptr) << error();
  EXPECT_NE(specialized, defaults);
  EXPECT_EQ(run(specialized, 4), (std::vector<int>{1, 11, 21, 31}));
  EXPECT_EQ(run(defaults, 4), (std::vector<int>{5, 8, 11, 14})) << "a kernel found before keeps its values";
  // The same values again: the program in memory.
  ASSERT_EQ(device_dlspecialize(handle, 3, &scale, sizeof scale), 0) << error();
  EXPECT_EQ(device_dlsym(handle, "SpecKernel"), specialized);

  EXPECT_NE(device_dlspecialize(handle, 99, &scale, sizeof scale), 0);
  EXPECT_EQ(error(), image("spec_kernel.spv") + ": no image declares specialization constant 99");
  EXPECT_NE(device_dlspecialize(handle, 3, &scale, 3), 0);
  EXPECT_EQ(error(), image("spec_kernel.spv") + ": specialization constant 3: a value of 3 bytes (1, 2, 4 or 8 are)");
  EXPECT_NE(device_dlspecialize(nullptr, 3, &scale, sizeof scale), 0);
  EXPECT_EQ(error(), "device_dlspecialize: invalid handle");
  device_dlclose(handle);
}

// A specialization constant set by the host address registered for it (seed 002): its unique id
// maps to SpecIds 3 and 7 (scale and offset) at their places in the host object's value.
TEST_F(DeviceDlopen, SpecializationConstantsSetByHostAddress) {
  DEVDL_ONLY_ON_SPIRV("CUDA has no specialization constants");
  static struct {
    uint32_t scale, offset;
  } constants;
  device_dlregister(&constants, "uid_constants", "specialization_id");
  void *handle = device_dlopen(image("spec-object.spv.devdl").c_str(), DEVDL_LAZY);
  ASSERT_NE(handle, nullptr) << error();
  EXPECT_EQ(run(device_dlsym(handle, "SpecKernel"), 4), (std::vector<int>{5, 8, 11, 14}));  // i * 3 + 5
  const decltype(constants) value{10, 1};
  ASSERT_EQ(device_dlspecialize_object(handle, &constants, &value, sizeof value), 0) << error();
  EXPECT_EQ(run(device_dlsym(handle, "SpecKernel"), 4), (std::vector<int>{1, 11, 21, 31}));
  EXPECT_NE(device_dlspecialize_object(handle, &constants, &value, 4), 0);
  EXPECT_EQ(error(), "device_dlspecialize_object: a value of 4 bytes: SpecId 7 takes 4 at offset 4");
  device_dlclose(handle);
}

}  // namespace
}  // namespace devdl::test
