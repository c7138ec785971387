// The CUDA toolkit's files devdl links with, found where the toolkit installs them: nvJitLink
// (nvjitlink.h) and the device runtime, libcudadevrt.a, whose device code nvcc -dlink links into
// every program that launches kernels from the device (dynamic parallelism) or calls the
// device-side runtime API. devdl links it the same way, where an image needs it.
#pragma once

#include "backend/backend.h"
#include "support/bytes.h"

#include <llvm/Support/Error.h>

#include <optional>
#include <span>
#include <string>
#include <vector>

namespace devdl::backend::cuda {

/// The directories a toolkit's libraries are looked for in, in order: those of LD_LIBRARY_PATH and
/// $CUDA_HOME/lib64 (neither in secure execution), /usr/local/cuda/lib64, then the system's library
/// directories (Debian's nvidia-cuda-toolkit installs there).
std::vector<std::string> toolkitLibraryDirectories();

/// A regular file's "<path> <size> <mtime ns>": what a disk cache key names it by, so that any
/// change to the file changes the key. nullopt where `path` is not a regular file.
std::optional<std::string> fileIdentity(const std::string &path);

struct DeviceRuntimeFile {
  std::string path;
  std::string identity;  // "libcudadevrt " + fileIdentity
};

/// DEVDL_CUDADEVRT (a path) where set, else the first libcudadevrt.a in toolkitLibraryDirectories.
/// nullopt where there is none (or DEVDL_CUDADEVRT names no regular file).
std::optional<DeviceRuntimeFile> findDeviceRuntime();

/// Where findDeviceRuntime looked, for a message that says it found none.
std::string deviceRuntimeSearch();

/// The device runtime's code (deviceRuntimeCode) where one of `inputs` imports one of its names (a
/// weak import, CudaProvider::DeviceRuntime), as nvcc -dlink links libcudadevrt.a; none where none
/// does. Fails naming the input and the name where `runtime` is none (the toolkit has none).
llvm::Expected<std::optional<Bytes>> deviceRuntimeFor(std::span<const LinkInput> inputs,
                                                      const std::optional<DeviceRuntimeFile> &runtime);

/// The device code of the device runtime at `file`: the fat binary of its object's __nv_relfatbin
/// section (a relocatable cubin for each architecture, which the linkers pick from). Read once in
/// the process, kept mapped. Fails naming the file where it is not such an archive.
llvm::Expected<Bytes> deviceRuntimeCode(const DeviceRuntimeFile &file);

}  // namespace devdl::backend::cuda
