// The end-to-end suite's fixture (e2e/*_test.cpp: dlopen_seed_test.cpp and the files beside it):
// device_dlopen / dlsym / dlclose / dlerror through the shared library's C API, on the device
// devdl chooses. One suite for every backend: the programs (data/e2e) are written once and built as
// SPIR-V and as cubins; the suite opens those of its device's backend. ctest runs it on OpenCL
// (PoCL here), again on Level Zero (the test driver on PoCL, tests/level_zero_driver), once for
// each of the backend's ways to link, on Intel's OpenCL CPU runtime and through the tests' OpenCL
// layer; scripts/gpu-run.sh runs it on CUDA with DEVDL_BACKEND=cuda. ctest runs each test in its
// own process, so the global scope starts empty, but for the host libraries this program loads;
// each test leaves the scopes as it found them, so that the suite passes in one process too.
#pragma once

#include "devdl.h"
#include "e2e/cuda_driver.h"
#include "e2e/level_zero_run.h"
#include "e2e/opencl_run.h"
#include "test_support.h"

#include <dlfcn.h>

#include <initializer_list>
#include <string>
#include <vector>

namespace devdl::test {

/// The suite runs on Intel's OpenCL CPU runtime (DEVDL_TEST_INTEL_OPENCL), or through the tests'
/// OpenCL layer (DEVDL_TEST_OPENCL_LAYER): set up before devdl's first call (dlopen_fixture.cpp).
extern const bool kIntelOpenCl, kOpenClLayer;

// What only OpenCL can be asked (a kernel's program), or a probe process that launches through
// OpenCL: elsewhere the test skips, saying so.
#define DEVDL_ONLY_ON_OPENCL(why) \
  if (!onOpenCl()) GTEST_SKIP() << "on OpenCL only: " << why
// What is made of SPIR-V alone (the host libraries carrying images, specialization constants):
// on CUDA the test skips, saying so.
#define DEVDL_ONLY_ON_SPIRV(why) \
  if (backend_ == DEVDL_BACKEND_CUDA) GTEST_SKIP() << "on SPIR-V backends only: " << why

class DeviceDlopen : public ::testing::Test {
 protected:
  void SetUp() override;

  // Opens `libraries` global, then `application`, whose kernel `kernel` uses interpose_var_first's
  // Level (2) and another Level of the libraries' own: the host reads and writes by the name the
  // one the application's kernel uses, whichever image comes first in the program.
  void expectTheExportedLevel(std::initializer_list<const char *> libraries, const char *application,
                              const char *kernel, const std::vector<int> &before, const std::vector<int> &afterFive);

  // Loads host library `library`, whose image 0 is the seed's lib.spv, RTLD_GLOBAL (into `host`),
  // where the global scope finds LibDeviceFunc, and opens app.spv over it with DEVDL_NOW (`app`).
  void openAppOverAGlobalHostLibrary(const char *library, void *&host, void *&app);
  // The global scope finds LibDeviceFunc no more: the host library defining it has gone.
  void expectTheGlobalScopeLacksLibDeviceFunc(const std::string &why);

  std::vector<int> run(void *kernel, size_t n) {
    if (backend_ == DEVDL_BACKEND_LEVEL_ZERO)
      return runIntKernel(zeContext_, zeDevice_, static_cast<ze_kernel_handle_t>(kernel), n);
    if (backend_ == DEVDL_BACKEND_CUDA) return cuda::runIntKernel(*cu_, cuContext_, kernel, static_cast<unsigned>(n));
    return runIntKernel(context_, device_, static_cast<cl_kernel>(kernel), n);
  }

  bool onOpenCl() const { return backend_ == DEVDL_BACKEND_OPENCL; }
  // Whether the OpenCL device reports half precision (cl_khr_fp16), as aspect fp16 asks.
  bool hasFp16() const {
    std::string extensions(8192, '\0');
    (*backend::opencl::api()).clGetDeviceInfo(device_, CL_DEVICE_EXTENSIONS, extensions.size() - 1,
                                              extensions.data(), nullptr);
    return extensions.find("cl_khr_fp16") != std::string::npos;
  }
  // Whether device_dlsym gives a variable's address: every backend but OpenCL; there, where the
  // driver gives them, or devdl places the variables.
  bool variablesHaveAddresses() const { return !onOpenCl() || usmMemcpy_ || devdlPlacesVariables(); }

  // Whether devdl moves a program's variables to host memory (docs/backends.md: an OpenCL CPU device that
  // shares the host's memory and takes SPIR rather than SPIR-V IL, as PoCL 3 does, and gives no
  // variables' addresses itself).
  bool devdlPlacesVariables() const;

  // Whether one kernel of an OpenCL program reads what another wrote to a program-scope variable
  // (OpenCL 2.0 says it does; PoCL 3.1 gives each kernel a copy of its own): asked of the driver
  // with a program built from source.
  bool openClKernelsShareProgramVariables();

  // An int at a device address devdl gave (Level Zero, CUDA), read and written as an application
  // does; -1 where a call failed.
  int readInt(void *address);
  void writeInt(void *address, int value);
  cl_int openClUsmCopy(void *to, const void *from, size_t size);

  /// data/e2e's program `name` (or the seed's lib and app) in the format of the device's backend.
  std::string deviceImage(const std::string &name) const { return image(name + extension_); }
  /// How devdl's messages name the first image of deviceImage(name).
  std::string where(const std::string &name) const { return deviceImage(name) + ": image 0 (" + imageWords_ + ")"; }

  // Opens `names` (deviceImage) with `flags`, in order; the handles are closed by the caller.
  std::vector<void *> openAll(std::initializer_list<const char *> names, int flags) const {
    std::vector<void *> handles;
    for (const char *name : names) {
      void *h = device_dlopen(deviceImage(name).c_str(), flags);
      EXPECT_NE(h, nullptr) << name << ": " << error();
      handles.push_back(h);
    }
    return handles;
  }

  // UserKernel (kernel_app.spv) and LibKernel (kernel_lib.spv), found, compute what they should.
  void expectKernelLibraryKernels(void *user, void *library) {
    ASSERT_NE(user, nullptr) << error();
    ASSERT_NE(library, nullptr) << error();
    EXPECT_EQ(run(user, 4), (std::vector<int>{1, 3, 5, 7}));
    EXPECT_EQ(run(library, 4), (std::vector<int>{100, 102, 104, 106}));
  }

  // Another reference to `program`, to ask of it after devdl let it go: clRetainProgram, which
  // devdl does not take, from the ICD loader devdl opened.
  static cl_int retainProgram(cl_program program) {
    static const auto retain = reinterpret_cast<decltype(&::clRetainProgram)>(
        dlsym(dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_NOLOAD), "clRetainProgram"));
    return retain ? retain(program) : CL_INVALID_OPERATION;
  }
  static cl_uint referencesOf(cl_program program) {
    cl_uint count = 0;
    (*backend::opencl::api()).clGetProgramInfo(program, CL_PROGRAM_REFERENCE_COUNT, sizeof count, &count, nullptr);
    return count;
  }
  static void releaseProgram(cl_program program) { (*backend::opencl::api()).clReleaseProgram(program); }

  // The program a kernel was made from.
  static cl_program programOf(void *kernel) {
    cl_program program = nullptr;
    (*backend::opencl::api()).clGetKernelInfo(static_cast<cl_kernel>(kernel), CL_KERNEL_PROGRAM, sizeof program,
                                              &program, nullptr);
    return program;
  }

  int backend_ = 0;
  std::string extension_ = ".spv", format_ = "spirv", imageWords_ = "spirv";
  cl_context context_ = nullptr;
  cl_device_id device_ = nullptr;
  ze_context_handle_t zeContext_ = nullptr;
  ze_device_handle_t zeDevice_ = nullptr;
  const cuda::Driver *cu_ = nullptr;
  cuda::CUcontext cuContext_ = nullptr;
  std::string deviceName_;
  std::string deviceWords_;  // "OpenCL device NAME", as devdl's errors name it
  bool cpu_ = false;         // a CPU (aspect cpu), else a GPU (aspect gpu)
  // Where the OpenCL driver gives variables' addresses (cl_intel_global_variable_pointers): the
  // copy of its unified shared memory, else null.
  backend::opencl::VariablePointers::Memcpy usmMemcpy_ = nullptr;
};

/// device_dliterate's callback: each image as "file global|local format symbols", into the
/// std::vector<std::string> `data` points to.
int collectImages(const devdl_image_info *info, void *data);

/// The file of each loaded image, in device_dliterate's order.
std::vector<std::string> loadedImageFiles();

/// Closes each handle that is not null.
void closeAll(const std::vector<void *> &handles);

}  // namespace devdl::test
