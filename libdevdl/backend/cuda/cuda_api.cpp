#include "backend/cuda/cuda_api.h"
#include "support/driver_library.h"
#include "support/error.h"

namespace devdl::backend::cuda {

namespace {

std::string nameOf(const Api &api, CUresult code) {
  const char *name = nullptr;
  if (api.cuGetErrorName(code, &name) != CUDA_SUCCESS) name = nullptr;
  return std::string(name ? name : "CUDA error") + " (" + std::to_string(code) + ")";
}

LoadedApi<Api> load() {
  LoadedApi<Api> loaded;
  Api &api = loaded.api;
  const EntryPoint entries[] = {
#define DEVDL_ENTRY(name, parameters, symbol) {symbol, reinterpret_cast<void **>(&api.name)},
      DEVDL_CUDA_FUNCTIONS(DEVDL_ENTRY)
#undef DEVDL_ENTRY
  };
  loaded.error = openDriverLibrary("libcuda.so.1", "CUDA driver", "a driver for CUDA 11 or later is needed", entries);
  if (loaded.error.empty())
    if (CUresult err = api.cuInit(0); err != CUDA_SUCCESS)
      loaded.error = "the CUDA driver has no usable device (cuInit: " + nameOf(api, err) + ")";
  return loaded;
}

}  // namespace

llvm::Expected<const Api &> api() { return loadedOnce(load); }

std::string errorName(CUresult code) {
  auto driver = api();
  if (driver) return nameOf(*driver, code);
  llvm::consumeError(driver.takeError());
  return "CUDA error (" + std::to_string(code) + ")";
}

llvm::Error cudaFailure(const llvm::Twine &what, CUresult code) {
  return fail(ErrorCode::Unsupported, what + " failed: " + errorName(code));
}

}  // namespace devdl::backend::cuda
