// A program linked with LTO as several modules, one per part of its kernels (backend/partition.h),
// each linked by nvJitLink on a thread of its own: the code of a large library compiles on every
// core, where one nvJitLink link runs most of it on one (its own split compilation and ptxas's
// gave 3.4x on 16 cores, the parts 8x: bench/README.md). Each part's link takes every input and
// keeps its own kernels (-kernels-used) and variables (-variables-used,
// -optimize-unused-variables); the program answers for each name from the module of the part that
// holds it, so a variable has one instance, the one its kernels use and device_dlsym gives.
#pragma once

#include "backend/cuda/nvjitlink.h"
#include "backend/packed_parts.h"
#include "backend/partition.h"

#include <llvm/Support/Error.h>

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace devdl::backend::cuda {

/// One module of a program: its cubin, and the kernels and variables it answers for.
using PartModule = PartBinary;

/// The parts an LTO link of `inputs` for compute capability `sm` splits into for `jobs` threads:
/// where every input is a fat binary whose LTO-IR is linked and whose PTX, compiled from the same
/// source, shows what its code refers to. One part where the link cannot be split, with why in
/// `why` where the inputs do not allow it. Kernels of which one's name begins with the other's go
/// in one part: nvJitLink keeps every kernel whose name begins with one -kernels-used names.
std::vector<ProgramPart> planLtoParts(std::span<const JitInput> inputs, int sm, unsigned jobs, std::string *why);

/// Links `inputs` with -lto once for each part, the parts on threads of their own, with `file`;
/// each part's ptxas may use `jobs` threads (`-Xptxas=--split-compile`), so that the cores the
/// lighter parts leave go to the heavier. Fails as the first part (in order) that fails. With
/// `times`, nvJitLink's account of each part's link (linkWithNvJitLink).
llvm::Expected<std::vector<PartModule>> linkLtoParts(const NvJitLinkFile &file, std::span<const JitInput> inputs,
                                                     int sm, std::span<const ProgramPart> parts, unsigned jobs,
                                                     std::vector<std::string> *times = nullptr);

/// The option that gives ptxas `jobs` threads for a link's functions; none for one thread.
std::vector<std::string> ptxasThreads(unsigned jobs);

/// A program's modules as one binary, as link() gives the disk cache (backend/packed_parts.h),
/// and back. A cubin (an ELF file) is never taken for one.
inline constexpr std::string_view kPackedModules = "devdl CUDA modules\n";
inline std::string packModules(std::span<const PartModule> modules) { return packParts(kPackedModules, modules); }
inline bool isPackedModules(std::string_view binary) { return isPackedParts(kPackedModules, binary); }
/// Fails with BadFormat where the binary does not hold what packModules writes.
inline llvm::Expected<std::vector<PartModule>> unpackModules(std::string_view binary) {
  return unpackParts(kPackedModules, binary, "CUDA modules");
}

}  // namespace devdl::backend::cuda
