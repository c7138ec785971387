// The addresses of a program's functions, which CUDA does not give the host: devdl links into each
// program it links without LTO a PTX module whose variables hold them, as device code takes a
// function's address (`__device__ int (*p)(int) = f;`), and their names. device_dlsym of a device
// function and device_dladdr of a function pointer read them from the loaded module, whether it
// was linked now or loaded from the disk cache. Under LTO nvJitLink makes functions local to the
// kernels that call them and the table does not link: such programs have none.
#pragma once

#include "image/device_image.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/Support/Error.h>

#include <span>
#include <string>
#include <string_view>

namespace devdl::backend::cuda {

inline constexpr const char *kFunctionAddresses = "__devdl_function_addresses";
inline constexpr const char *kFunctionNames = "__devdl_function_names";

/// The PTX of the table of `functions` (the names of the functions a program's images define), in
/// their order; "" where there are none. Names PTX cannot spell are left out.
std::string functionTablePtx(std::span<const std::string_view> functions);

/// The table read back: the bytes of kFunctionAddresses (one 64-bit address per function) and of
/// kFunctionNames (the names, each ended by a NUL); fails where they do not agree.
llvm::Expected<llvm::StringMap<void *>> readFunctionTable(std::string_view addresses, std::string_view names);

}  // namespace devdl::backend::cuda
