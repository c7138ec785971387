#include "backend/opencl/opencl_api.h"
#include "support/error.h"

#include <CL/cl_ext.h>

#include <dlfcn.h>

#include <mutex>

namespace devdl::backend::opencl {

namespace {

struct Loaded {
  Api api;
  std::string error;  // empty when every entry point was found
};

Loaded load() {
  Loaded loaded;
  // Never closed: OpenCL objects may outlive any devdl handle.
  void *library = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    loaded.error = std::string("no OpenCL: cannot load libOpenCL.so.1 (") + dlerror() + ")";
    return loaded;
  }
#define DEVDL_LOAD(name)                                                                     \
  loaded.api.name = reinterpret_cast<decltype(&::name)>(dlsym(library, #name));              \
  if (!loaded.api.name && loaded.error.empty())                                              \
    loaded.error = "libOpenCL.so.1 lacks " #name " (an OpenCL 2.1 ICD loader is needed)";
  DEVDL_OPENCL_FUNCTIONS(DEVDL_LOAD)
#undef DEVDL_LOAD
  loaded.api.clSetProgramSpecializationConstant = reinterpret_cast<decltype(&::clSetProgramSpecializationConstant)>(
      dlsym(library, "clSetProgramSpecializationConstant"));
  return loaded;
}

}  // namespace

llvm::Expected<const Api &> api() {
  static const Loaded loaded = load();  // thread-safe initialization
  if (!loaded.error.empty()) return fail(ErrorCode::NotFound, loaded.error);
  return loaded.api;
}

std::string errorName(cl_int code) {
  const char *name = nullptr;
  switch (code) {
#define DEVDL_CASE(c) \
  case c: name = #c; break;
    DEVDL_CASE(CL_SUCCESS) DEVDL_CASE(CL_DEVICE_NOT_FOUND) DEVDL_CASE(CL_DEVICE_NOT_AVAILABLE)
    DEVDL_CASE(CL_COMPILER_NOT_AVAILABLE) DEVDL_CASE(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    DEVDL_CASE(CL_OUT_OF_RESOURCES) DEVDL_CASE(CL_OUT_OF_HOST_MEMORY)
    DEVDL_CASE(CL_BUILD_PROGRAM_FAILURE) DEVDL_CASE(CL_LINK_PROGRAM_FAILURE)
    DEVDL_CASE(CL_INVALID_VALUE) DEVDL_CASE(CL_INVALID_PLATFORM) DEVDL_CASE(CL_INVALID_DEVICE)
    DEVDL_CASE(CL_INVALID_CONTEXT) DEVDL_CASE(CL_INVALID_BINARY) DEVDL_CASE(CL_INVALID_BUILD_OPTIONS)
    DEVDL_CASE(CL_INVALID_PROGRAM) DEVDL_CASE(CL_INVALID_PROGRAM_EXECUTABLE)
    DEVDL_CASE(CL_INVALID_KERNEL_NAME) DEVDL_CASE(CL_INVALID_KERNEL) DEVDL_CASE(CL_INVALID_OPERATION)
    DEVDL_CASE(CL_INVALID_LINKER_OPTIONS) DEVDL_CASE(CL_PLATFORM_NOT_FOUND_KHR)
#undef DEVDL_CASE
  }
  return std::string(name ? name : "OpenCL error") + " (" + std::to_string(code) + ")";
}

}  // namespace devdl::backend::opencl
