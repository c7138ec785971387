// What an OpenCL driver answers of its platforms, devices and programs (the info queries), read
// as devdl reads them: a query that fails is an empty answer, never an error of its own.
#pragma once

#include "backend/opencl/opencl_api.h"

#include <llvm/Support/Error.h>

#include <string>
#include <string_view>

namespace devdl::backend::opencl {

/// "WHAT failed: CL_ERROR_NAME", as ErrorCode::Unsupported.
llvm::Error clFailure(const char *what, cl_int code);

// A string an info query gives (clGetPlatformInfo, clGetDeviceInfo); "" where it fails.
template <typename Query, typename Object, typename Param>
std::string infoString(Query query, Object object, Param param) {
  size_t size = 0;
  if (query(object, param, 0, nullptr, &size) != CL_SUCCESS || size == 0) return {};
  std::string value(size, '\0');
  if (query(object, param, size, value.data(), nullptr) != CL_SUCCESS) return {};
  value.resize(value.find('\0') == std::string::npos ? size : value.find('\0'));
  return value;
}

std::string platformString(const Api &api, cl_platform_id platform, cl_platform_info param);
std::string deviceString(const Api &api, cl_device_id device, cl_device_info param);

/// A value clGetDeviceInfo gives; T{} where it fails.
template <typename T>
T deviceValue(const Api &api, cl_device_id device, cl_device_info param) {
  T value{};
  if (api.clGetDeviceInfo(device, param, sizeof value, &value, nullptr) != CL_SUCCESS) return T{};
  return value;
}

/// Whether the space-separated `list` (CL_DEVICE_EXTENSIONS) has `word` as one of its words, not
/// as a part of one (cl_khr_spir is not in "cl_khr_spirv_linkonce_odr").
bool hasWord(const std::string &list, std::string_view word);

/// The program's build log on `device`, without the driver's trailing newlines; "" where none.
std::string buildLog(const Api &api, cl_program program, cl_device_id device);

}  // namespace devdl::backend::opencl
