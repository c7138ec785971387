// libnvJitLink, NVIDIA's linker library (CUDA 12 and later), opened at run time as the driver is.
// Where the driver's cuLink only joins compiled code, nvJitLink links cubins, PTX, fat binaries
// and LTO-IR, and with -lto optimizes across all of them: a kernel calling into a separately
// compiled library runs as if both were compiled together.
#pragma once

#include "image/device_image.h"

#include <llvm/Support/Error.h>

#include <optional>
#include <span>
#include <string>

namespace devdl::backend::cuda {

/// The library file devdl links with, found without loading it: loading costs about 10 ms (a
/// 100 MB library), which a disk-cache hit must not pay, yet the cache key names the linker.
struct NvJitLinkFile {
  std::string path;
  int major = 0;         // of the soname: 13 for libnvJitLink.so.13; its entry points end in _13_0
  std::string identity;  // "nvJitLink <path> <size> <mtime ns>": changes whenever the file does
};

/// DEVDL_NVJITLINK (a path) where set, else the first libnvJitLink.so.13, then .so.12, in the
/// directories of LD_LIBRARY_PATH (not in secure execution), $CUDA_HOME/lib64, /usr/local/cuda/lib64
/// and the system's library directories. nullopt where there is none (or DEVDL_NVJITLINK names
/// no regular file).
std::optional<NvJitLinkFile> findNvJitLink();

/// What nvJitLink takes.
enum class JitInputKind { Cubin, Ptx, Fatbin };

struct JitInput {
  JitInputKind kind;
  Bytes data;
  const std::string *label;  // the image, in errors and in nvJitLink's own log
};

/// "-arch=sm_90 -lto": the options a link with `lto` for compute capability `sm` passes.
std::string nvJitLinkOptions(int sm, bool lto);

/// Links `inputs` into one cubin for compute capability `sm` with the library `file` (loaded on
/// first use, kept for the life of the process), across every input with -lto where `lto`.
/// nvJitLink takes a fat binary whole and picks its member (its LTO-IR under -lto). Fails naming
/// the input nvJitLink refused, or the undefined symbol (Unresolved), with nvJitLink's log.
/// Thread-safe: each call has its own nvJitLink handle.
///
/// `more`: options that change how fast the link is, or what of the program it keeps, never what
/// the code it keeps does (-kernels-used=, -split-compile=). Always -no-cache: devdl's disk cache
/// keeps linked programs under devdl's rules (DEVDL_CACHE=0 is a cold link), where nvJitLink's
/// own cache, in the driver's, is keyed by nvJitLink. An nvJitLink that refuses one of these
/// options (an older one) links without them.
///
/// With `times`, nvJitLink's own account of where the time went (-time): its optimization and
/// code generation to PTX, then ptxas and the finish, in milliseconds, on one line.
llvm::Expected<std::string> linkWithNvJitLink(const NvJitLinkFile &file, std::span<const JitInput> inputs, int sm,
                                              bool lto, std::span<const std::string> more = {},
                                              std::string *times = nullptr);

/// The library's version ("13.0"), loading it; empty where it does not say (before CUDA 12.3).
llvm::Expected<std::string> nvJitLinkVersion(const NvJitLinkFile &file);

}  // namespace devdl::backend::cuda
