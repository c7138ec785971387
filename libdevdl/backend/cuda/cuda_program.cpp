// A linked program's lookups: kernels, variables and the table of functions, each from the module
// that holds it.
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/function_table.h"
#include "support/debug.h"
#include "support/error.h"

namespace devdl::backend::cuda {

Program::~Program() {
  if (runtimes_) return;
  CallTimes times;
  ContextScope current(api_, context_);
  for (CUmodule module : modules_) api_.cuModuleUnload(module);
  times.mark("cuModuleUnload");
  times.print("unloaded a program on " + device_);
}

CUmodule Program::moduleOf(std::string_view name) const {
  auto owner = owners_.find(llvm::StringRef(name.data(), name.size()));
  return modules_[owner == owners_.end() ? 0 : owner->second];
}

llvm::Expected<void *> Program::kernel(std::string_view name) {
  return kernels_.get(
      name,
      [&]() -> llvm::Expected<CUfunction> {
        CallTimes times;
        ContextScope current(api_, context_);
        CUfunction function = nullptr;
        if (CUresult err = api_.cuModuleGetFunction(&function, moduleOf(name), std::string(name).c_str());
            err != CUDA_SUCCESS)
          return fail(err == CUDA_ERROR_NOT_FOUND ? ErrorCode::NotFound : ErrorCode::Unsupported,
                      "kernel `" + llvm::Twine(name) + "`: cuModuleGetFunction failed: " + errorName(err));
        times.mark("cuModuleGetFunction");
        times.print("kernel `" + std::string(name) + "`");
        return function;
      },
      [](CUfunction) {});  // a function goes with its module: nothing to release
}

llvm::Expected<std::pair<CUdeviceptr, size_t>> Program::global(std::string_view name) {
  CUdeviceptr address = 0;
  size_t size = 0;
  if (CUresult err = api_.cuModuleGetGlobal(&address, &size, moduleOf(name), std::string(name).c_str());
      err != CUDA_SUCCESS)
    return fail(err == CUDA_ERROR_NOT_FOUND ? ErrorCode::NotFound : ErrorCode::Unsupported,
                "variable `" + llvm::Twine(name) + "`: cuModuleGetGlobal failed: " + errorName(err));
  return std::pair{address, size};
}

llvm::Expected<Extent> Program::variable(std::string_view name) {
  ContextScope current(api_, context_);
  auto found = global(name);
  if (!found) return found.takeError();
  return Extent{reinterpret_cast<void *>(static_cast<uintptr_t>(found->first)), found->second};
}

llvm::Error Program::copyVariable(std::string_view name, size_t offset, void *host, size_t size, bool toDevice) {
  ContextScope current(api_, context_);
  auto found = global(name);
  if (!found) return found.takeError();
  const auto [address, bytes] = *found;
  if (llvm::Error err = checkInsideVariable(name, bytes, offset, size)) return err;
  const CUresult err = toDevice ? api_.cuMemcpyHtoD(address + offset, host, size)
                                : api_.cuMemcpyDtoH(host, address + offset, size);
  if (err != CUDA_SUCCESS)
    return fail(ErrorCode::Unsupported, "variable `" + llvm::Twine(name) + "`: " +
                                            (toDevice ? "cuMemcpyHtoD" : "cuMemcpyDtoH") + " failed: " + errorName(err));
  return llvm::Error::success();
}

llvm::Expected<void *> Program::function(std::string_view name) {
  std::call_once(functionsRead_, [&] {
    ContextScope current(api_, context_);
    auto addresses = global(kFunctionAddresses);
    auto names = addresses ? global(kFunctionNames) : addresses.takeError();
    if (!names) {
      llvm::consumeError(names.takeError());
      noFunctions_ = "this program has no table of its functions (devdl links one where an image takes a "
                     "function's address, as only there can a function pointer be; not under LTO, where nvJitLink "
                     "makes functions local to the kernels that call them)";
      return;
    }
    std::string bytes[2] = {std::string(addresses->second, '\0'), std::string(names->second, '\0')};
    CUresult err = api_.cuMemcpyDtoH(bytes[0].data(), addresses->first, bytes[0].size());
    if (err == CUDA_SUCCESS) err = api_.cuMemcpyDtoH(bytes[1].data(), names->first, bytes[1].size());
    if (err != CUDA_SUCCESS) {
      noFunctions_ = "its program's table of functions could not be read: cuMemcpyDtoH failed: " + errorName(err);
      return;
    }
    auto table = readFunctionTable(bytes[0], bytes[1]);
    if (table) functions_ = std::move(*table);
    else noFunctions_ = llvm::toString(table.takeError());
  });
  if (auto found = functions_.find(llvm::StringRef(name.data(), name.size())); found != functions_.end())
    return found->second;
  return fail(ErrorCode::Unsupported, "`" + llvm::Twine(name) +
                                          "` is a device function: CUDA gives the host no device function pointers, "
                                          "and " + (noFunctions_.empty() ? "its program's table of functions does "
                                                                           "not hold it" : noFunctions_));
}

}  // namespace devdl::backend::cuda
