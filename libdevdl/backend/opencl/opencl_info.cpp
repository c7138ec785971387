// The info queries devdl asks of an OpenCL driver, and its errors in words.
#include "backend/opencl/opencl_info.h"

#include "support/error.h"

namespace devdl::backend::opencl {

llvm::Error clFailure(const char *what, cl_int code) {
  return fail(ErrorCode::Unsupported, llvm::Twine(what) + " failed: " + errorName(code));
}

std::string platformString(const Api &api, cl_platform_id platform, cl_platform_info param) {
  return infoString(api.clGetPlatformInfo, platform, param);
}

std::string deviceString(const Api &api, cl_device_id device, cl_device_info param) {
  return infoString(api.clGetDeviceInfo, device, param);
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

}  // namespace devdl::backend::opencl
