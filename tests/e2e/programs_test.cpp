// The end-to-end suite (e2e/dlopen_fixture.h): programs shared and kept, as the device runs them:
// the same code from another file, a library's kernel from its importer's program, closing a handle
// or a library, and images opened from memory that outlive their handle and memory.
#include "e2e/dlopen_fixture.h"

#include <sys/mman.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace devdl::test {
namespace {

TEST_F(DeviceDlopen, SameCodeFromAnotherFileSharesTheProgram) {
  const std::string copy = scratchDir() + "/app-copy" + extension_;
  std::filesystem::copy_file(deviceImage("app"), copy);
  void *lib = device_dlopen(deviceImage("lib").c_str(), DEVDL_NOW | DEVDL_GLOBAL);
  void *app = device_dlopen(deviceImage("app").c_str(), DEVDL_NOW);
  void *again = device_dlopen(copy.c_str(), DEVDL_NOW);
  ASSERT_NE(lib, nullptr) << error();
  ASSERT_NE(app, nullptr) << error();
  ASSERT_NE(again, nullptr) << error();
  EXPECT_NE(again, app);  // another file: another handle
  void *kernel = device_dlsym(app, "AppKernel");
  ASSERT_NE(kernel, nullptr) << error();
  // The same images for the same device: the program linked for the first handle.
  EXPECT_EQ(device_dlsym(again, "AppKernel"), kernel);
  // Closing one of the handles keeps the program the other one uses.
  EXPECT_EQ(device_dlclose(again), 0);
  EXPECT_EQ(device_dlsym(app, "AppKernel"), kernel);
  EXPECT_EQ(run(kernel, 4), (std::vector<int>{0, 2, 4, 6}));
  device_dlclose(app);
  device_dlclose(lib);
}

TEST_F(DeviceDlopen, ALibrarysKernelComesFromTheProgramOfItsImporter) {
  // LAZY: the library's kernel is asked for after the application's (NOW would link it first).
  void *lib = device_dlopen(deviceImage("kernel_lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = device_dlopen(deviceImage("kernel_app").c_str(), DEVDL_NOW);
  ASSERT_NE(lib, nullptr) << error();
  ASSERT_NE(app, nullptr) << error();
  void *user = device_dlsym(app, "UserKernel");
  void *library = device_dlsym(lib, "LibKernel");
  ASSERT_NO_FATAL_FAILURE(expectKernelLibraryKernels(user, library));
  // The library's code was built once: its kernel is in the application's program.
  if (onOpenCl()) {
    EXPECT_EQ(programOf(library), programOf(user));
  }
  // Without the application the program stays for the library's kernel.
  EXPECT_EQ(device_dlclose(app), 0);
  EXPECT_EQ(device_dlsym(lib, "LibKernel"), library);
  EXPECT_EQ(run(library, 4), (std::vector<int>{100, 102, 104, 106}));
  device_dlclose(lib);
}

TEST_F(DeviceDlopen, DlsymOfAHandleFindsWhatItsImportsBindTo) {
  // As glibc's dlsym(handle) searches the object's dependencies: kernel_app.spv's import binds
  // to kernel_lib.spv, so its handle finds the library's kernel, from the program its own
  // kernel runs in.
  void *lib = device_dlopen(deviceImage("kernel_lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = device_dlopen(deviceImage("kernel_app").c_str(), DEVDL_LAZY);
  ASSERT_NE(lib, nullptr) << error();
  ASSERT_NE(app, nullptr) << error();
  void *library = device_dlsym(app, "LibKernel");
  void *user = device_dlsym(app, "UserKernel");
  ASSERT_NO_FATAL_FAILURE(expectKernelLibraryKernels(user, library));
  if (onOpenCl()) {
    EXPECT_EQ(programOf(library), programOf(user));
  }
  EXPECT_EQ(device_dlsym(lib, "LibKernel"), library);
  devdl_symbol_info info{};
  info.size = sizeof info;
  ASSERT_EQ(device_dlsyminfo(app, "LibTwice", &info), 0) << error();
  EXPECT_EQ(std::string(info.file), deviceImage("kernel_lib"));
  EXPECT_EQ(info.kind, DEVDL_SYMBOL_FUNCTION);
  device_dlclose(app);
  device_dlclose(lib);
}

TEST_F(DeviceDlopen, ALibrarysKernelFirstLinksTheLoadedImportersWithIt) {
  void *lib = device_dlopen(deviceImage("kernel_lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = device_dlopen(deviceImage("kernel_app").c_str(), DEVDL_LAZY);
  // An importer that cannot be linked (LAZY: its error waits for its own kernel) is left out.
  void *broken = device_dlopen(deviceImage("kernel_app_broken").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_NE(lib, nullptr) << error();
  ASSERT_NE(app, nullptr) << error();
  ASSERT_NE(broken, nullptr) << error();
  void *library = device_dlsym(lib, "LibKernel");  // the library's kernel first
  ASSERT_NE(library, nullptr) << error();
  void *user = device_dlsym(app, "UserKernel");
  ASSERT_NE(user, nullptr) << error();
  EXPECT_EQ(run(library, 4), (std::vector<int>{100, 102, 104, 106}));
  EXPECT_EQ(run(user, 4), (std::vector<int>{1, 3, 5, 7}));
  if (onOpenCl()) {
    EXPECT_EQ(programOf(user), programOf(library)) << "the library's code was built twice";
  }
  EXPECT_EQ(device_dlsym(broken, "BrokenKernel"), nullptr);
  EXPECT_NE(error().find("undefined device symbol `NowhereDefined`"), std::string::npos) << error();
  device_dlclose(broken);
  device_dlclose(app);
  device_dlclose(lib);
}

// A program lives while the handles of its images are open: closing the application lets its
// program go (the library alone has no kernel to keep it), and opening the files again links anew.
// (A program without variables: devdl keeps one with variables in host memory while another holder
// has it: AKernelKeptPastTheCloseStillHasItsVariables.)
TEST_F(DeviceDlopen, ClosingAHandleReleasesItsProgram) {
  DEVDL_ONLY_ON_OPENCL("CL_PROGRAM_REFERENCE_COUNT tells when devdl lets the program go");
  // CL_PROGRAM_REFERENCE_COUNT is exact on PoCL.
  void *lib = device_dlopen(deviceImage("kernel_lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = device_dlopen(deviceImage("kernel_app").c_str(), DEVDL_NOW);
  ASSERT_NE(lib, nullptr) << error();
  ASSERT_NE(app, nullptr) << error();
  void *kernel = device_dlsym(app, "UserKernel");
  ASSERT_NE(kernel, nullptr) << error();
  const cl_program program = programOf(kernel);
  ASSERT_EQ(retainProgram(program), CL_SUCCESS);
  EXPECT_GT(referencesOf(program), 1u);
  EXPECT_EQ(device_dlclose(app), 0);
  EXPECT_EQ(referencesOf(program), 1u) << "devdl still holds the program of a closed handle";

  app = device_dlopen(deviceImage("kernel_app").c_str(), DEVDL_NOW);
  ASSERT_NE(app, nullptr) << error();
  kernel = device_dlsym(app, "UserKernel");
  ASSERT_NE(kernel, nullptr) << error();
  EXPECT_NE(programOf(kernel), program);
  EXPECT_EQ(run(kernel, 4), (std::vector<int>{1, 3, 5, 7}));
  device_dlclose(app);
  device_dlclose(lib);
  releaseProgram(program);
}

// As the host loader keeps a library its dependents use: closing lib.spv while app.spv's program
// uses it leaves that program as it was linked; the library leaves the scopes at once and goes
// with the program.
TEST_F(DeviceDlopen, ClosingALibraryKeepsItForTheProgramsThatUseIt) {
  void *lib = device_dlopen(deviceImage("lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = device_dlopen(deviceImage("app").c_str(), DEVDL_NOW);
  ASSERT_NE(lib, nullptr) << error();
  ASSERT_NE(app, nullptr) << error();
  void *kernel = device_dlsym(app, "AppKernel");
  ASSERT_NE(kernel, nullptr) << error();
  EXPECT_EQ(device_dlclose(lib), 0);
  EXPECT_EQ(device_dlsym(app, "AppKernel"), kernel) << error();
  EXPECT_EQ(run(kernel, 4), (std::vector<int>{0, 2, 4, 6}));
  devdl_symbol_info info{};
  info.size = sizeof info;
  ASSERT_EQ(device_dlsyminfo(app, "LibDeviceFunc", &info), 0) << error();
  EXPECT_EQ(std::string(info.file), deviceImage("lib")) << "what app's program binds to";
  // Out of the scopes: not loaded, not listed, and a new handle does not see it.
  EXPECT_EQ(device_dlopen(deviceImage("lib").c_str(), DEVDL_LAZY | DEVDL_NOLOAD), nullptr);
  std::vector<std::string> seen;
  EXPECT_EQ(device_dliterate(collectImages, &seen), 0);
  EXPECT_EQ(seen, (std::vector<std::string>{"app" + extension_ + " local " + format_ + " 2"}));
  const std::string copy = scratchDir() + "/app-copy" + extension_;
  std::filesystem::copy_file(deviceImage("app"), copy);
  EXPECT_EQ(device_dlopen(copy.c_str(), DEVDL_NOW), nullptr);
  EXPECT_EQ(error(), copy + ": image 0 (" + imageWords_ + "): undefined device symbol `LibDeviceFunc`");
  // The program goes with the last handle using it.
  if (!onOpenCl()) {  // only OpenCL counts a program's references
    EXPECT_EQ(device_dlclose(app), 0);
    return;
  }
  const cl_program program = programOf(kernel);
  ASSERT_EQ(retainProgram(program), CL_SUCCESS);
  EXPECT_EQ(device_dlclose(app), 0);
  // Where devdl placed its variables (LibCounter) in host memory, it keeps its reference, and the
  // variables, while another holder (the test) has the program.
  EXPECT_EQ(referencesOf(program), devdlPlacesVariables() ? 2u : 1u);
  releaseProgram(program);
}

TEST_F(DeviceDlopen, OpenFromMemoryAndDescribeSymbols) {
  const std::string bytes = readFile(deviceImage("lib"));
  void *lib = device_dlopen_mem(bytes.data(), bytes.size(), "lib-in-memory", DEVDL_NOW | DEVDL_GLOBAL);
  ASSERT_NE(lib, nullptr) << error();
  EXPECT_EQ(device_dlopen_mem(bytes.data(), bytes.size(), "again", DEVDL_LAZY), lib) << "same memory, same handle";
  devdl_symbol_info info{};
  info.size = sizeof info;
  ASSERT_EQ(device_dlsyminfo(device_dlopen(nullptr, DEVDL_LAZY), "LibDeviceFunc", &info), 0) << error();
  EXPECT_EQ(info.kind, DEVDL_SYMBOL_FUNCTION);
  EXPECT_STREQ(info.file, "lib-in-memory");
  EXPECT_EQ(info.image, 0u);
  EXPECT_EQ(info.format, format_);
  ASSERT_EQ(device_dlsyminfo(lib, "LibCounter", &info), 0) << error();
  EXPECT_EQ(info.kind, DEVDL_SYMBOL_VARIABLE);
  EXPECT_NE(device_dlsyminfo(lib, "Nothing", &info), 0);
  EXPECT_EQ(error(), "lib-in-memory: undefined device symbol `Nothing`");

  void *app = device_dlopen(deviceImage("app").c_str(), DEVDL_NOW);
  ASSERT_NE(app, nullptr) << error();
  EXPECT_EQ(run(device_dlsym(app, "AppKernel"), 3), (std::vector<int>{0, 2, 4}));
  device_dlclose(app);
  device_dlclose(lib);
  device_dlclose(lib);
  const std::string bad = "\x03\x02\x23\x07 not really SPIR-V";
  EXPECT_EQ(device_dlopen_mem(bad.data(), bad.size(), "junk", DEVDL_LAZY), nullptr);
  EXPECT_NE(error().find("junk: image 0 (spirv): invalid SPIR-V"), std::string::npos);
}

// The memory given to device_dlopen_mem need only live until the handle is closed, though the
// images live on with the programs that use them: nothing reads it afterwards (unmapped, any
// read would fault), and the plan and the name say what the kernel runs.
TEST_F(DeviceDlopen, AMemoryLibraryOutlivesItsHandleAndItsMemory) {
  const std::string bytes = readFile(deviceImage("lib"));
  void *memory = mmap(nullptr, bytes.size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(memory, MAP_FAILED);
  std::memcpy(memory, bytes.data(), bytes.size());
  void *lib = device_dlopen_mem(memory, bytes.size(), "lib-in-memory", DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_NE(lib, nullptr) << error();
  void *app = device_dlopen(deviceImage("app").c_str(), DEVDL_LAZY);
  ASSERT_NE(app, nullptr) << error();
  void *kernel = device_dlsym(app, "AppKernel");
  ASSERT_NE(kernel, nullptr) << error();
  EXPECT_EQ(device_dlclose(lib), 0) << error();
  ASSERT_EQ(munmap(memory, bytes.size()), 0);

  const char *plan = device_dlplan(app, "AppKernel");
  ASSERT_NE(plan, nullptr) << error();
  EXPECT_EQ(std::string(plan), "AppKernel: " + where("app") + "\n  LibDeviceFunc (" + where("app") +
                                   ") -> lib-in-memory: image 0 (" + imageWords_ + ")\n");
  devdl_symbol_info info{};
  info.size = sizeof info;
  ASSERT_EQ(device_dlsyminfo(app, "LibDeviceFunc", &info), 0) << error();
  EXPECT_STREQ(info.file, "lib-in-memory");
  EXPECT_EQ(device_dlsym(app, "AppKernel"), kernel);
  EXPECT_EQ(run(kernel, 4), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(device_dlclose(app), 0) << error();
}

}  // namespace
}  // namespace devdl::test
