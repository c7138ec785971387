// Which CUDA code runs on which device, by the driver's rules: a cubin, PTX or fat binary for an
// architecture on a device of a compute capability, and the member of a fat binary a device is
// given.
#pragma once

#include "image/device_image.h"
#include "image/readers.h"

#include <span>
#include <string_view>

namespace devdl::backend::cuda {

/// Whether code of `format` for `arch` runs on a device of compute capability `sm` (90 for
/// 9.0): a cubin on the same major version at the same or a higher minor one, PTX on the same
/// or a later version (JIT), an arch-specific `a` target only on its own version; a fatbin when
/// one of its members does (`arch` lists them: "sm_80,sm_90,compute_90").
bool runsOn(ImageFormat format, std::string_view arch, int sm);

/// The member of a fat binary a device of compute capability `sm` is given: a cubin of the highest
/// version that runs there, else PTX of the highest; with `ptxOnly`, PTX alone. Null where none of
/// `members` runs there.
const readers::FatbinMember *bestMember(std::span<const readers::FatbinMember> members, int sm, bool ptxOnly);

/// Whether one of `members` is LTO-IR that compiles for `sm` (for its own version and later ones,
/// as PTX does).
bool hasLtoIrFor(std::span<const readers::FatbinMember> members, int sm);

}  // namespace devdl::backend::cuda
