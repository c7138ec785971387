// The addresses of a program's functions, which CUDA does not give the host: devdl links into a
// program a PTX module whose variables hold them, as device code takes a function's address
// (`__device__ int (*p)(int) = f;`), and their names. device_dlsym of a device function and
// device_dladdr of a function pointer read them from the loaded module, whether it was linked now
// or loaded from the disk cache.
//
// Only where an image of the program takes a function's address, since only there can a function
// pointer exist, and the table's JIT compilation and link cost a program that has none a third of
// its link (bench/README.md). Not under LTO, where nvJitLink makes functions local to the kernels
// that call them and the table does not link.
#pragma once

#include "image/device_image.h"
#include "support/bytes.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/Support/Error.h>

#include <span>
#include <string>
#include <string_view>

namespace devdl::backend::cuda {

/// The head of the PTX devdl writes into a program for compute capability `sm` (90 for 9.0): its
/// own target, with the first PTX ISA version that knows it. Not an older target that JIT-compiles
/// anywhere: a linked program's code reports the oldest virtual architecture of its inputs as its
/// PTX version (cudaFuncGetAttributes), which CUB checks against the architectures it was compiled
/// for (its kernels fail with cudaErrorInvalidDeviceFunction otherwise, measured on the H100).
std::string ptxHeader(int sm);

inline constexpr const char *kFunctionAddresses = "__devdl_function_addresses";
inline constexpr const char *kFunctionNames = "__devdl_function_names";

/// Whether device code of a cubin or PTX takes a function's address: a relocation of a function
/// that is not a call (cubin: of another function than the one its code is; a function's address
/// in a variable's initializer), or a function's name as an operand that is not a call's (PTX).
/// An image that cannot be read is taken to.
bool takesFunctionAddresses(Bytes data, bool ptx);

/// The PTX of the table of `functions` (the names of the functions a program's images define), in
/// their order, for compute capability `sm`; "" where there are none. Names PTX cannot spell are
/// left out.
std::string functionTablePtx(std::span<const std::string_view> functions, int sm);

/// The table read back: the bytes of kFunctionAddresses (one 64-bit address per function) and of
/// kFunctionNames (the names, each ended by a NUL); fails where they do not agree.
llvm::Expected<llvm::StringMap<void *>> readFunctionTable(std::string_view addresses, std::string_view names);

}  // namespace devdl::backend::cuda
