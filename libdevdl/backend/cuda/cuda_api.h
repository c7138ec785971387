// The CUDA driver API entry points devdl uses, taken from libcuda.so.1 at run time: one build
// of devdl runs where there is no NVIDIA driver and says so.
#pragma once

#include "backend/cuda/cuda_types.h"

#include <llvm/Support/Error.h>

#include <string>

namespace devdl::backend::cuda {

/// The driver's entry points, loaded and cuInit'ed on first use and kept for the life of the
/// process. Fails with NotFound where there is no driver ("no CUDA driver: ...") or no device.
llvm::Expected<const Api &> api();

/// "CUDA_ERROR_INVALID_IMAGE (200)".
std::string errorName(CUresult code);

/// An Unsupported error: "WHAT failed: " and the code's name.
llvm::Error cudaFailure(const llvm::Twine &what, CUresult code);

/// Makes a context current on this thread for the driver calls of one scope.
class ContextScope {
 public:
  ContextScope(const Api &api, CUcontext context) : api_(api) {
    pushed_ = api.cuCtxPushCurrent(context) == CUDA_SUCCESS;
  }
  ~ContextScope() {
    CUcontext popped;
    if (pushed_) api_.cuCtxPopCurrent(&popped);
  }

 private:
  const Api &api_;
  bool pushed_;
};

}  // namespace devdl::backend::cuda
