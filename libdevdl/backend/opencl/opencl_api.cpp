#include "backend/opencl/opencl_api.h"
#include "support/driver_library.h"

#include <CL/cl_ext.h>

namespace devdl::backend::opencl {

namespace {

LoadedApi<Api> load() {
  LoadedApi<Api> loaded;
  Api &api = loaded.api;
  const EntryPoint entries[] = {
#define DEVDL_ENTRY(name) {#name, reinterpret_cast<void **>(&api.name)},
      DEVDL_OPENCL_FUNCTIONS(DEVDL_ENTRY)
#undef DEVDL_ENTRY
      {"clSetProgramSpecializationConstant", reinterpret_cast<void **>(&api.clSetProgramSpecializationConstant),
       /*optional=*/true},
  };
  loaded.error = openDriverLibrary("libOpenCL.so.1", "OpenCL", "an OpenCL 2.1 ICD loader is needed", entries);
  return loaded;
}

}  // namespace

llvm::Expected<const Api &> api() { return loadedOnce(load); }

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
