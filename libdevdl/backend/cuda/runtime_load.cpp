// A program the CUDA runtime loads (backend::RuntimeLoad): linked as one module with devdl's anchor
// kernel in it, then looked up in the module the runtime loaded, found through that kernel.
#include "backend/cuda/cuda_device.h"
#include "support/error.h"

namespace devdl::backend::cuda {

llvm::Expected<std::string> Device::linkForRuntime(std::span<const LinkInput> inputs) {
  return linkBinary(inputs, true);
}

llvm::Expected<std::unique_ptr<backend::Program>> Device::loadThrough(std::string_view binary,
                                                                     const RuntimeLoad &runtime) {
  if (isPackedModules(binary))
    return fail(ErrorCode::Unsupported, "a program of several modules cannot be loaded by a runtime");
  auto function = runtime.load(binary, kRuntimeAnchor);
  if (!function) return function.takeError();
  // The runtime loaded it in the context current on this thread: devdl's, or the program's
  // lookups, cells and instances would be another device's.
  CUcontext loadedIn = nullptr;
  if (api_.cuCtxGetCurrent(&loadedIn) != CUDA_SUCCESS || loadedIn != context_)
    return fail(ErrorCode::Unsupported,
                "the CUDA runtime loaded the program on another device or context than devdl links for (" + name_ +
                    ", DEVDL_DEVICE): its current device must be devdl's when the library loads");
  ContextScope current(api_, context_);
  CUmodule module = nullptr;
  if (CUresult err = api_.cuFuncGetModule(&module, static_cast<CUfunction>(*function)); err != CUDA_SUCCESS)
    return fail(ErrorCode::Unsupported,
                "cuFuncGetModule of the module the CUDA runtime loaded failed: " + errorName(err));
  return std::make_unique<Program>(api_, context_, std::vector{module}, llvm::StringMap<unsigned>(), name_,
                                   /*runtimes=*/true);
}

}  // namespace devdl::backend::cuda
