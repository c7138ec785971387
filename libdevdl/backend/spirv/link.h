// The link of a plan's SPIR-V images into one module, by SPIRV-Tools' linker: what devdl does
// around it so that the module it makes is one program (versions raised to one, specialization
// constants kept apart, local variables unnamed, builtin variables merged) and valid. Its own
// file since devices that take SPIR-V IL use the module as it is, and a linker of the tests' own
// (the Level Zero test driver's) needs the same steps.
#pragma once

#include "image/device_image.h"

#include <llvm/Support/Error.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
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

/// The SpecId that SpecId `specId` of the `module`th image (from 0) has in what linkSpirv
/// links: module << 16 | specId, so that images' constants stay apart (the first's keep theirs).
uint32_t linkedSpecId(size_t module, uint32_t specId);

}  // namespace devdl::backend
