#include "backend/cuda/cuda_api.h"
#include "support/error.h"

#include <dlfcn.h>

namespace devdl::backend::cuda {

namespace {

std::string nameOf(const Api &api, CUresult code) {
  const char *name = nullptr;
  if (api.cuGetErrorName(code, &name) != CUDA_SUCCESS) name = nullptr;
  return std::string(name ? name : "CUDA error") + " (" + std::to_string(code) + ")";
}

struct Loaded {
  Api api;
  std::string error;  // empty when the driver is usable
};

Loaded load() {
  Loaded loaded;
  // Never closed: modules and contexts may outlive any devdl handle.
  void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    loaded.error = std::string("no CUDA driver: cannot load libcuda.so.1 (") + dlerror() + ")";
    return loaded;
  }
#define DEVDL_LOAD(name, parameters, symbol)                                         \
  loaded.api.name = reinterpret_cast<decltype(loaded.api.name)>(dlsym(library, symbol)); \
  if (!loaded.api.name && loaded.error.empty())                                     \
    loaded.error = "libcuda.so.1 lacks " symbol " (a driver for CUDA 11 or later is needed)";
  DEVDL_CUDA_FUNCTIONS(DEVDL_LOAD)
#undef DEVDL_LOAD
  if (!loaded.error.empty()) return loaded;
  if (CUresult err = loaded.api.cuInit(0); err != CUDA_SUCCESS)
    loaded.error = "the CUDA driver has no usable device (cuInit: " + nameOf(loaded.api, err) + ")";
  return loaded;
}

}  // namespace

llvm::Expected<const Api &> api() {
  static const Loaded loaded = load();  // thread-safe initialization
  if (!loaded.error.empty()) return fail(ErrorCode::NotFound, loaded.error);
  return loaded.api;
}

std::string errorName(CUresult code) {
  auto driver = api();
  if (driver) return nameOf(*driver, code);
  llvm::consumeError(driver.takeError());
  return "CUDA error (" + std::to_string(code) + ")";
}

}  // namespace devdl::backend::cuda
