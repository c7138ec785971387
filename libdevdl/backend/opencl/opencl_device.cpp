#include "backend/opencl/opencl_device.h"
#include "support/error.h"

#include <CL/cl_ext.h>

#include <cstdlib>
#include <vector>

namespace devdl::backend::opencl {

namespace {

llvm::Error clFailure(const char *what, cl_int code) {
  return fail(ErrorCode::Unsupported, llvm::Twine(what) + " failed: " + errorName(code));
}

std::string deviceString(const Api &api, cl_device_id device, cl_device_info param) {
  size_t size = 0;
  if (api.clGetDeviceInfo(device, param, 0, nullptr, &size) != CL_SUCCESS || size == 0) return {};
  std::string value(size, '\0');
  if (api.clGetDeviceInfo(device, param, size, value.data(), nullptr) != CL_SUCCESS) return {};
  value.resize(value.find('\0') == std::string::npos ? size : value.find('\0'));
  return value;
}

template <typename T>
T deviceValue(const Api &api, cl_device_id device, cl_device_info param) {
  T value{};
  if (api.clGetDeviceInfo(device, param, sizeof value, &value, nullptr) != CL_SUCCESS) return T{};
  return value;
}

bool hasWord(const std::string &list, std::string_view word) {
  for (size_t pos = list.find(word); pos != std::string::npos; pos = list.find(word, pos + 1)) {
    const bool startOk = pos == 0 || list[pos - 1] == ' ';
    const bool endOk = pos + word.size() == list.size() || list[pos + word.size()] == ' ';
    if (startOk && endOk) return true;
  }
  return false;
}

std::string buildLog(const Api &api, cl_program program, cl_device_id device) {
  size_t size = 0;
  if (api.clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size) != CL_SUCCESS)
    return {};
  std::string log(size, '\0');
  api.clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

}  // namespace

llvm::Expected<cl_kernel> Program::createKernel(std::string_view name) const {
  cl_int err = CL_SUCCESS;
  cl_kernel kernel = api_->clCreateKernel(program_, std::string(name).c_str(), &err);
  if (err != CL_SUCCESS)
    return fail(ErrorCode::NotFound, "kernel `" + llvm::Twine(name) + "`: " + errorName(err));
  return kernel;
}

Device::Device(const Api &api, cl_platform_id platform, cl_device_id device, cl_context context)
    : api_(api), platform_(platform), device_(device), context_(context) {
  name_ = deviceString(api, device, CL_DEVICE_NAME);
  const std::string extensions = deviceString(api, device, CL_DEVICE_EXTENSIONS);
  caps_.spirvIl = deviceString(api, device, CL_DEVICE_IL_VERSION).find("SPIR-V") != std::string::npos;
  caps_.spir = hasWord(extensions, "cl_khr_spir");
  caps_.linker = deviceValue<cl_bool>(api, device, CL_DEVICE_LINKER_AVAILABLE);
}

Device::~Device() { api_.clReleaseContext(context_); }

llvm::Expected<std::unique_ptr<Device>> Device::openDefault() {
  auto loaded = opencl::api();
  if (!loaded) return loaded.takeError();
  const Api &cl = *loaded;
  cl_uint numPlatforms = 0;
  cl_int err = cl.clGetPlatformIDs(0, nullptr, &numPlatforms);
  if (err == CL_PLATFORM_NOT_FOUND_KHR || numPlatforms == 0)
    return fail(ErrorCode::NotFound, "no OpenCL platform (no ICD is installed)");
  if (err != CL_SUCCESS) return clFailure("clGetPlatformIDs", err);
  std::vector<cl_platform_id> platforms(numPlatforms);
  if ((err = cl.clGetPlatformIDs(numPlatforms, platforms.data(), nullptr)) != CL_SUCCESS)
    return clFailure("clGetPlatformIDs", err);

  // The candidates, in platform then device order: devices that can compile.
  std::vector<std::pair<cl_platform_id, cl_device_id>> candidates;
  for (cl_platform_id platform : platforms) {
    cl_uint numDevices = 0;
    if (cl.clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &numDevices) != CL_SUCCESS) continue;
    std::vector<cl_device_id> devices(numDevices);
    if (cl.clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, numDevices, devices.data(), nullptr) != CL_SUCCESS)
      continue;
    for (cl_device_id device : devices)
      if (deviceValue<cl_bool>(cl, device, CL_DEVICE_COMPILER_AVAILABLE)) candidates.emplace_back(platform, device);
  }
  if (candidates.empty()) return fail(ErrorCode::NotFound, "no OpenCL device with a compiler");

  size_t chosen = 0;
  if (const char *wanted = std::getenv("DEVDL_DEVICE"); wanted && *wanted) {
    unsigned index;
    if (!llvm::StringRef(wanted).getAsInteger(10, index)) {
      if (index >= candidates.size())
        return fail(ErrorCode::NotFound, "DEVDL_DEVICE=" + std::string(wanted) + ": there are " +
                                             std::to_string(candidates.size()) + " OpenCL devices");
      chosen = index;
    } else {
      chosen = candidates.size();
      for (size_t i = 0; i < candidates.size() && chosen == candidates.size(); ++i)
        if (deviceString(cl, candidates[i].second, CL_DEVICE_NAME).find(wanted) != std::string::npos) chosen = i;
      if (chosen == candidates.size())
        return fail(ErrorCode::NotFound, "DEVDL_DEVICE=" + std::string(wanted) + ": no OpenCL device has that name");
    }
  }
  auto [platform, device] = candidates[chosen];
  const cl_context_properties properties[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(platform), 0};
  cl_context context = cl.clCreateContext(properties, 1, &device, nullptr, nullptr, &err);
  if (err != CL_SUCCESS) return clFailure("clCreateContext", err);
  return std::unique_ptr<Device>(new Device(cl, platform, device, context));
}

llvm::Expected<std::unique_ptr<Device>> Device::attach(cl_device_id device, cl_context context) {
  auto loaded = opencl::api();
  if (!loaded) return loaded.takeError();
  const Api &cl = *loaded;
  cl_platform_id platform = nullptr;
  cl_int err = cl.clGetDeviceInfo(device, CL_DEVICE_PLATFORM, sizeof platform, &platform, nullptr);
  if (err != CL_SUCCESS) return clFailure("device_dlattach: clGetDeviceInfo", err);
  if ((err = cl.clRetainContext(context)) != CL_SUCCESS) return clFailure("device_dlattach: clRetainContext", err);
  return std::unique_ptr<Device>(new Device(cl, platform, device, context));
}

llvm::Expected<Program> Device::buildSpir(std::string_view bitcode, std::string_view options) const {
  if (!caps_.spir) return fail(ErrorCode::Unsupported, "device " + name_ + " does not take SPIR (no cl_khr_spir)");
  const auto *bytes = reinterpret_cast<const unsigned char *>(bitcode.data());
  const size_t size = bitcode.size();
  cl_int status = CL_SUCCESS, err = CL_SUCCESS;
  cl_program program = api_.clCreateProgramWithBinary(context_, 1, &device_, &size, &bytes, &status, &err);
  if (err != CL_SUCCESS) return clFailure("clCreateProgramWithBinary (SPIR)", err);
  Program owned(api_, program);
  const std::string buildOptions = "-x spir -spir-std=1.2" + (options.empty() ? "" : " " + std::string(options));
  err = api_.clBuildProgram(program, 1, &device_, buildOptions.c_str(), nullptr, nullptr);
  if (err != CL_SUCCESS) {
    std::string log = buildLog(api_, program, device_);
    return fail(ErrorCode::Unsupported, "clBuildProgram on " + name_ + " failed: " + errorName(err) +
                                            (log.empty() ? "" : "\n" + log));
  }
  return owned;
}

}  // namespace devdl::backend::opencl
