#include "backend/level_zero/ze_api.h"
#include "support/driver_library.h"

#include <cstdio>

namespace devdl::backend::level_zero {

namespace {

LoadedApi<Api> load() {
  LoadedApi<Api> loaded;
  Api &api = loaded.api;
  const EntryPoint entries[] = {
#define DEVDL_ENTRY(name) {#name, reinterpret_cast<void **>(&api.name)},
      DEVDL_ZE_FUNCTIONS(DEVDL_ENTRY)
#undef DEVDL_ENTRY
      {"zeModuleInspectLinkageExt", reinterpret_cast<void **>(&api.zeModuleInspectLinkageExt), /*optional=*/true},
  };
  loaded.error = openDriverLibrary("libze_loader.so.1", "Level Zero", "a Level Zero 1.4 loader is needed", entries);
  return loaded;
}

}  // namespace

llvm::Expected<const Api &> api() { return loadedOnce(load); }

std::string errorName(ze_result_t result) {
  const char *name = nullptr;
  switch (result) {
#define DEVDL_CASE(c) \
  case c: name = #c; break;
    DEVDL_CASE(ZE_RESULT_SUCCESS) DEVDL_CASE(ZE_RESULT_ERROR_UNINITIALIZED) DEVDL_CASE(ZE_RESULT_ERROR_DEVICE_LOST)
    DEVDL_CASE(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY) DEVDL_CASE(ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)
    DEVDL_CASE(ZE_RESULT_ERROR_MODULE_BUILD_FAILURE) DEVDL_CASE(ZE_RESULT_ERROR_MODULE_LINK_FAILURE)
    DEVDL_CASE(ZE_RESULT_ERROR_UNSUPPORTED_VERSION) DEVDL_CASE(ZE_RESULT_ERROR_UNSUPPORTED_FEATURE)
    DEVDL_CASE(ZE_RESULT_ERROR_INVALID_ARGUMENT) DEVDL_CASE(ZE_RESULT_ERROR_INVALID_NULL_HANDLE)
    DEVDL_CASE(ZE_RESULT_ERROR_INVALID_NULL_POINTER) DEVDL_CASE(ZE_RESULT_ERROR_INVALID_SIZE)
    DEVDL_CASE(ZE_RESULT_ERROR_INVALID_ENUMERATION) DEVDL_CASE(ZE_RESULT_ERROR_INVALID_NATIVE_BINARY)
    DEVDL_CASE(ZE_RESULT_ERROR_INVALID_GLOBAL_NAME) DEVDL_CASE(ZE_RESULT_ERROR_INVALID_KERNEL_NAME)
    DEVDL_CASE(ZE_RESULT_ERROR_INVALID_FUNCTION_NAME) DEVDL_CASE(ZE_RESULT_ERROR_INVALID_MODULE_UNLINKED)
    DEVDL_CASE(ZE_RESULT_ERROR_UNKNOWN)
#undef DEVDL_CASE
    default: break;
  }
  char code[16];
  std::snprintf(code, sizeof code, "0x%08x", static_cast<unsigned>(result));
  return std::string(name ? name : "Level Zero error") + " (" + code + ")";
}

}  // namespace devdl::backend::level_zero
