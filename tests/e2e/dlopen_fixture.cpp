// The end-to-end suite's fixture (e2e/dlopen_fixture.h): the configuration it runs in, set up
// before devdl's first call, and what the fixture asks of the device.
#include "e2e/dlopen_fixture.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace devdl::test {

// DEVDL_TEST_LEVEL_ZERO=1 or 0 (whether the test driver reports the module-program extension)
// runs the suite on Level Zero, set up before devdl's first call.
const bool kLevelZero = [] {
  const char *variant = std::getenv("DEVDL_TEST_LEVEL_ZERO");
  if (!variant) return false;
  setenv("DEVDL_BACKEND", "level_zero", 1);
  setenv("ZE_ENABLE_ALT_DRIVERS", DEVDL_TEST_ZE_DRIVER, 1);
  setenv("DEVDL_TEST_ZE_MODULE_PROGRAM", variant, 1);
  setenv("DEVDL_CACHE", "0", 0);  // as ctest's ENVIRONMENT gives the suite on OpenCL
  return true;
}();

// DEVDL_TEST_OPENCL_LAYER=1 runs the suite on OpenCL with the tests' layer before PoCL (a device
// that takes SPIR-V IL and gives its variables' addresses, as Intel's drivers do), set up before
// the ICD loader's first call. Optimized across images (DEVDL_LTO=1): the path no other suite
// takes, and the one where devdl applies specialization constants itself, which the layer cannot.
const bool kOpenClLayer = [] {
  if (!std::getenv("DEVDL_TEST_OPENCL_LAYER")) return false;
  setenv("OPENCL_LAYERS", DEVDL_TEST_OPENCL_LAYER, 1);
  setenv("DEVDL_CACHE", "0", 0);
  setenv("DEVDL_LTO", "1", 0);
  return true;
}();

// DEVDL_TEST_INTEL_OPENCL=1 runs the suite on Intel's OpenCL CPU runtime (scripts/setup-debian.sh
// unpacks it into /opt/devdl-intel-ocl), alone: the seeds' path, SPIR-V IL compiled and linked by
// a real driver. Set up before the ICD loader's first call; where it is missing, the suite fails.
const bool kIntelOpenCl = [] {
  if (!std::getenv("DEVDL_TEST_INTEL_OPENCL")) return false;
  setenv("OCL_ICD_VENDORS", DEVDL_TEST_INTEL_OPENCL_ICD, 1);
  setenv("DEVDL_CACHE", "0", 0);
  return true;
}();

void DeviceDlopen::SetUp() {
  devdl_native native{};
  native.size = sizeof native;
  if (device_dlnative(&native) != 0) {
    if (kIntelOpenCl) FAIL() << DEVDL_TEST_INTEL_OPENCL_ICD << ": " << device_dlerror() << " (scripts/setup-debian.sh)";
    GTEST_SKIP() << "no device to run on: " << device_dlerror();
  }
  backend_ = native.backend;
  if (backend_ == DEVDL_BACKEND_OPENCL) {
    context_ = static_cast<cl_context>(native.context);
    device_ = static_cast<cl_device_id>(native.device);
    char name[256] = {};
    (*backend::opencl::api()).clGetDeviceInfo(device_, CL_DEVICE_NAME, sizeof name - 1, name, nullptr);
    deviceName_ = name;
    deviceWords_ = "OpenCL device " + deviceName_;
    cl_device_type type = 0;
    (*backend::opencl::api()).clGetDeviceInfo(device_, CL_DEVICE_TYPE, sizeof type, &type, nullptr);
    cpu_ = type & CL_DEVICE_TYPE_CPU;
    // Intel's variable pointers, as devdl asks for them: USM named, the entry points given (the
    // tests' layer gives them on PoCL; Intel's CPU runtime gives them without naming them).
    std::string extensions(4096, '\0');
    (*backend::opencl::api()).clGetDeviceInfo(device_, CL_DEVICE_EXTENSIONS, extensions.size() - 1,
                                              extensions.data(), nullptr);
    cl_platform_id platform = nullptr;
    (*backend::opencl::api()).clGetDeviceInfo(device_, CL_DEVICE_PLATFORM, sizeof platform, &platform, nullptr);
    auto entry = [&](const char *name) {
      return (*backend::opencl::api()).clGetExtensionFunctionAddressForPlatform(platform, name);
    };
    if (extensions.find("cl_intel_unified_shared_memory") != std::string::npos &&
        entry("clGetDeviceGlobalVariablePointerINTEL"))
      usmMemcpy_ = reinterpret_cast<backend::opencl::VariablePointers::Memcpy>(entry("clEnqueueMemcpyINTEL"));
    if (kIntelOpenCl) {  // else the suite would run on another driver, and pass for the wrong reason
      char platformName[256] = {};
      (*backend::opencl::api()).clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof platformName - 1, platformName,
                                                  nullptr);
      ASSERT_EQ(std::string(platformName), "Intel(R) OpenCL") << "OCL_ICD_VENDORS=" << DEVDL_TEST_INTEL_OPENCL_ICD;
    }
    if (kOpenClLayer) {  // else the suite would run on PoCL as it is, and pass for the wrong reason
      ASSERT_NE(usmMemcpy_, nullptr) << "the tests' OpenCL layer is not before the driver: OPENCL_LAYERS="
                                     << DEVDL_TEST_OPENCL_LAYER;
    }
  } else if (backend_ == DEVDL_BACKEND_LEVEL_ZERO) {
    zeContext_ = static_cast<ze_context_handle_t>(native.context);
    zeDevice_ = static_cast<ze_device_handle_t>(native.device);
    deviceName_ = levelZeroDeviceName(zeDevice_);
    deviceWords_ = "Level Zero device " + deviceName_;
    ze_device_properties_t properties{};
    properties.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
    ze::api().zeDeviceGetProperties(zeDevice_, &properties);
    cpu_ = properties.type == ZE_DEVICE_TYPE_CPU;
  } else if (backend_ == DEVDL_BACKEND_CUDA) {
    DEVDL_REQUIRE_CUDA_IMAGES();
    std::string why;
    cu_ = cuda::driver(&why);
    ASSERT_NE(cu_, nullptr) << why;
    cuContext_ = static_cast<cuda::CUcontext>(native.context);
    char name[256] = {};
    const auto device = static_cast<cuda::CUdevice>(reinterpret_cast<intptr_t>(native.device));
    cu_->cuDeviceGetName(name, sizeof name - 1, device);
    deviceName_ = name;
    deviceWords_ = "CUDA device " + deviceName_;
    // data/e2e's programs as nvcc -rdc -arch=sm_90 cubins (tests/CMakeLists.txt).
    extension_ = ".cubin";
    format_ = "cubin";
    imageWords_ = "cubin sm_90";
  } else {
    GTEST_SKIP() << "devdl's default device is on backend " << backend_ << ", which this suite does not know";
  }
}

void DeviceDlopen::expectTheExportedLevel(std::initializer_list<const char *> libraries, const char *application,
                                          const char *kernel, const std::vector<int> &before,
                                          const std::vector<int> &afterFive) {
  auto libs = openAll(libraries, DEVDL_LAZY | DEVDL_GLOBAL);
  void *app = device_dlopen(deviceImage(application).c_str(), DEVDL_NOW);
  ASSERT_NE(app, nullptr) << error();
  void *function = device_dlsym(app, kernel);
  ASSERT_NE(function, nullptr) << error();
  EXPECT_EQ(run(function, 2), before);
  int level = 0;
  ASSERT_EQ(device_dlread(app, "Level", 0, &level, sizeof level), 0) << error();
  EXPECT_EQ(level, 2);
  level = 5;
  ASSERT_EQ(device_dlwrite(app, "Level", 0, &level, sizeof level), 0) << error();
  EXPECT_EQ(run(function, 2), afterFive);
  device_dlclose(app);
  for (void *lib : libs) EXPECT_EQ(device_dlclose(lib), 0);
}

void DeviceDlopen::openAppOverAGlobalHostLibrary(const char *library, void *&host, void *&app) {
  host = dlopen(library, RTLD_NOW | RTLD_GLOBAL);
  ASSERT_NE(host, nullptr) << dlerror();
  devdl_symbol_info info{};
  info.size = sizeof info;
  ASSERT_EQ(device_dlsyminfo(device_dlopen(nullptr, DEVDL_LAZY), "LibDeviceFunc", &info), 0) << error();
  EXPECT_EQ(std::string(info.file), library);
  EXPECT_EQ(info.image, 0u);
  app = device_dlopen(deviceImage("app").c_str(), DEVDL_NOW);
  ASSERT_NE(app, nullptr) << error();
}

void DeviceDlopen::expectTheGlobalScopeLacksLibDeviceFunc(const std::string &why) {
  devdl_symbol_info info{};
  info.size = sizeof info;
  EXPECT_NE(device_dlsyminfo(device_dlopen(nullptr, DEVDL_LAZY), "LibDeviceFunc", &info), 0) << why;
  EXPECT_EQ(error(), "the global scope: undefined device symbol `LibDeviceFunc`");
}

bool DeviceDlopen::devdlPlacesVariables() const {
  if (!onOpenCl() || !cpu_ || usmMemcpy_) return false;
  const auto &cl = *backend::opencl::api();
  cl_bool unified = CL_FALSE;
  cl.clGetDeviceInfo(device_, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, nullptr);
  std::string version(256, '\0');
  cl.clGetDeviceInfo(device_, CL_DEVICE_IL_VERSION, version.size() - 1, version.data(), nullptr);
  return unified && version.find("SPIR-V") == std::string::npos;
}

bool DeviceDlopen::openClKernelsShareProgramVariables() {
  const auto &cl = *backend::opencl::api();
  const char *source = "global int G = 3;\n"
                       "kernel void set(global int *v) { G = v[0]; }\n"
                       "kernel void get(global int *v) { v[0] = G; }\n";
  cl_int err = CL_SUCCESS;
  cl_program program = cl.clCreateProgramWithSource(context_, 1, &source, nullptr, &err);
  EXPECT_EQ(cl.clBuildProgram(program, 1, &device_, "-cl-std=CL2.0", nullptr, nullptr), CL_SUCCESS);
  cl_kernel set = cl.clCreateKernel(program, "set", &err), get = cl.clCreateKernel(program, "get", &err);
  int value = 40;
  cl_mem buffer = cl.clCreateBuffer(context_, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof value, &value, &err);
  cl_command_queue queue = cl.clCreateCommandQueueWithProperties(context_, device_, nullptr, &err);
  const size_t one = 1;
  for (cl_kernel kernel : {set, get}) {
    cl.clSetKernelArg(kernel, 0, sizeof buffer, &buffer);
    cl.clEnqueueNDRangeKernel(queue, kernel, 1, nullptr, &one, &one, 0, nullptr, nullptr);
  }
  value = 0;
  EXPECT_EQ(cl.clEnqueueReadBuffer(queue, buffer, CL_TRUE, 0, sizeof value, &value, 0, nullptr, nullptr), CL_SUCCESS);
  cl.clReleaseCommandQueue(queue);
  cl.clReleaseMemObject(buffer);
  cl.clReleaseKernel(set);
  cl.clReleaseKernel(get);
  cl.clReleaseProgram(program);
  return value == 40;
}

int DeviceDlopen::readInt(void *address) {
  int value = -1;
  if (backend_ == DEVDL_BACKEND_LEVEL_ZERO) {
    EXPECT_TRUE(copyMemory(zeContext_, zeDevice_, &value, address, sizeof value));
  } else if (backend_ == DEVDL_BACKEND_CUDA) {
    EXPECT_EQ(cu_->cuCtxPushCurrent(cuContext_), cuda::CUDA_SUCCESS);
    EXPECT_EQ(cu_->cuMemcpyDtoH(&value, reinterpret_cast<cuda::CUdeviceptr>(address), sizeof value),
              cuda::CUDA_SUCCESS);
    cuda::CUcontext popped;
    cu_->cuCtxPopCurrent(&popped);
  } else if (usmMemcpy_) {
    EXPECT_EQ(openClUsmCopy(&value, address, sizeof value), CL_SUCCESS);
  } else {
    std::memcpy(&value, address, sizeof value);  // OpenCL: where devdl placed it, in host memory
  }
  return value;
}

void DeviceDlopen::writeInt(void *address, int value) {
  if (backend_ == DEVDL_BACKEND_LEVEL_ZERO) {
    EXPECT_TRUE(copyMemory(zeContext_, zeDevice_, address, &value, sizeof value));
  } else if (backend_ == DEVDL_BACKEND_CUDA) {
    EXPECT_EQ(cu_->cuCtxPushCurrent(cuContext_), cuda::CUDA_SUCCESS);
    EXPECT_EQ(cu_->cuMemcpyHtoD(reinterpret_cast<cuda::CUdeviceptr>(address), &value, sizeof value),
              cuda::CUDA_SUCCESS);
    cuda::CUcontext popped;
    cu_->cuCtxPopCurrent(&popped);
  } else if (usmMemcpy_) {
    EXPECT_EQ(openClUsmCopy(address, &value, sizeof value), CL_SUCCESS);
  } else {
    std::memcpy(address, &value, sizeof value);
  }
}

cl_int DeviceDlopen::openClUsmCopy(void *to, const void *from, size_t size) {
  const auto &cl = *backend::opencl::api();
  cl_int err = CL_SUCCESS;
  cl_command_queue queue = cl.clCreateCommandQueueWithProperties(context_, device_, nullptr, &err);
  if (err != CL_SUCCESS) return err;
  err = usmMemcpy_(queue, CL_TRUE, to, from, size, 0, nullptr, nullptr);
  cl.clReleaseCommandQueue(queue);
  return err;
}

int collectImages(const devdl_image_info *info, void *data) {
  auto &seen = *static_cast<std::vector<std::string> *>(data);
  seen.push_back(std::filesystem::path(info->file).filename().string() + (info->global ? " global" : " local") +
                 " " + info->format + " " + std::to_string(info->symbols));
  return 0;
}

std::vector<std::string> loadedImageFiles() {
  std::vector<std::string> files;
  device_dliterate(
      [](const devdl_image_info *info, void *data) {
        static_cast<std::vector<std::string> *>(data)->push_back(info->file);
        return 0;
      },
      &files);
  return files;
}

void closeAll(const std::vector<void *> &handles) {
  for (void *h : handles)
    if (h) {
      EXPECT_EQ(device_dlclose(h), 0);
    }
}

}  // namespace devdl::test
