// The software link strategy for devices that take SPIR but not SPIR-V linking (PoCL 3): link
// the plan's SPIR-V images into one module with SPIRV-Tools' linker, then translate it to SPIR
// 1.2 bitcode with the SPIRV-LLVM-Translator for clBuildProgram("-x spir").
#pragma once

#include "image/device_image.h"

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/Support/Error.h>

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace devdl::backend {

/// Links SPIR-V images, in plan order, into one executable module, which must validate. Inputs of
/// different SPIR-V versions are raised to the highest (what newer SPIRV-Tools'
/// --use-highest-version does); specialization constants are renumbered per image (linkedSpecId).
/// `labels` names each image in errors ("app.spv: image 0 (spirv)"), parallel to `images`. With
/// `keepExports`, what the images export stays exported (with the Linkage capability), for a
/// driver that gives variables' addresses by name: a variable no longer exported is internal to
/// the program, which an optimizer (LLVM's, the driver's) may fold away or drop.
llvm::Expected<std::vector<uint32_t>> linkSpirv(std::span<const DeviceImage *const> images,
                                                std::span<const std::string> labels, bool keepExports = false);

/// What SPIRV-Tools' linker leaves of each module's variable for a builtin (get_global_id reads
/// GlobalInvocationId): one variable per builtin, the others' uses pointed at it. linkSpirv does
/// it; a linker of its own (the Level Zero test driver's) needs it too.
llvm::Expected<std::vector<uint32_t>> mergeBuiltinVariables(std::vector<uint32_t> words);

/// Drops the names of a module's variables in the global address space that it does not export
/// (statics, definitions made local): once linked, a program must answer to a name only for the
/// variable exported under it (the host reads variables by name). linkSpirv does it to each
/// module; a linker of its own needs it too.
void unnameLocalVariables(std::vector<uint32_t> &words);

/// A specialization constant: SpecId and value.
using SpecConstant = std::pair<uint32_t, uint64_t>;

/// The SpecId that SpecId `specId` of the `module`th image (from 0) has in what linkSpirv
/// links: module << 16 | specId, so that images' constants stay apart (the first's keep theirs).
uint32_t linkedSpecId(size_t module, uint32_t specId);

/// Whether this build has the SPIRV-LLVM-Translator (not the portable one).
bool canTranslateToSpir();

/// Whether the translator takes `words` without ending the process, where the SPIR-V validator
/// lets through what it exits, asserts or crashes on (a version or an extension it does not know,
/// an alignment not a power of 2, a function with fewer parameters than its type, a builtin
/// variable used other than loaded, a specialization constant's operation it folds unchecked, and
/// more: TranslatorLimits in spirv_link.cpp has each, tests/data/fuzz-regressions an input for
/// each). An error says which.
llvm::Error checkTranslatable(std::span<const uint32_t> words);

/// The kernel of devdl's that copies `variable` between the host and the device (copyKernels):
/// (uchar *buffer, ulong offset, ulong size, int toDevice) stores the variable's size (a ulong) in
/// buffer[0, 8) and, where [offset, offset + size) lies inside it, copies those bytes between the
/// variable and buffer[8, 8 + size): into it when toDevice.
std::string copyKernelName(std::string_view variable);

/// A SPIR-V module of devdl's with the copy kernel (copyKernelName) of each of `variables` that
/// `definer` (a SPIR-V image's words) exports, importing them: linked with the images, by the
/// software link or by the device's own linker, it lets the host read and write the variables
/// where the driver gives no addresses of them. Fails without the SPIRV-LLVM-Translator
/// (DEVDL_PORTABLE), where `definer` exports none of them, and where the translator cannot read
/// the image or write the module.
llvm::Expected<std::vector<uint32_t>> copyKernels(std::span<const uint32_t> definer,
                                                  std::span<const std::string> variables);

/// A linked program's variables moved into one region of host memory: where each lies, and what
/// the region holds before any kernel runs.
struct VariableLayout {
  struct Variable {
    std::string name;
    uint64_t offset = 0, size = 0;
  };
  /// Where the region holds the address of a place in it: at offset `at`, the region's address
  /// plus `addend` (as ELF's R_X86_64_RELATIVE).
  struct Relocation {
    uint64_t at = 0, addend = 0;
  };
  uint64_t size = 0;                    // the region's bytes
  std::vector<Variable> variables;      // those with a name
  std::string initial;                  // the region's first bytes, as the initializers give them; the rest is zero
  std::vector<Relocation> relocations;  // applied over `initial` once the region's address is known
};

/// The most bytes of variables placeVariables moves to host memory, and a stored program may name:
/// bounded, since what they start as is made in memory (a program with more keeps them all).
inline constexpr uint64_t kMaxRegion = uint64_t(64) << 20;

/// Where a region of `layout.size` bytes for the variables is, in host memory; or why there is none.
using PlaceVariables = llvm::function_ref<llvm::Expected<uint64_t>(const VariableLayout &)>;

/// Translates a SPIR-V module into SPIR 1.2 bitcode (OpenCL 1.2 builtins), specializing it;
/// refused first where checkTranslatable refuses it. With `place` (a CPU device whose kernels are
/// built apart, each with its own copy of the program's variables: PoCL), every variable in the
/// global address space moves to the region `place` gives, which every kernel then addresses,
/// but those whose initializers hold an address outside it (a function's): they stay. With `optimize` (load-time LTO of a linked
/// program), every function but the kernels is made internal and LLVM's -O2 pipeline runs over
/// the module: what the images call of each other is inlined.
llvm::Expected<std::string> spirvToSpir(std::span<const uint32_t> words,
                                        std::span<const SpecConstant> specConstants = {}, bool optimize = false,
                                        PlaceVariables place = nullptr);

/// The linked module optimized across its former images for a device that takes SPIR-V IL, as
/// spirvToSpir optimizes it, through LLVM: SPIRV-Tools' optimizer does not inline in OpenCL
/// (Kernel) modules. The constants are applied (none is left to set) and the result is written
/// back within the module's SPIR-V version and extensions, and validated. Fails, leaving the
/// module to be used as linked, where the translator cannot write back what LLVM made.
llvm::Expected<std::vector<uint32_t>> optimizeSpirv(std::span<const uint32_t> words,
                                                    std::span<const SpecConstant> specConstants = {});

}  // namespace devdl::backend
