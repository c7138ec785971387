// The CUDA linkers' logs in devdl's words: the driver's cuLink and nvJitLink name a missing symbol
// their own way; devdl names the input and the symbol as its other errors do.
#pragma once

#include <string>
#include <string_view>

namespace devdl::backend::cuda {

/// Rewrites the driver's or nvJitLink's link log for messages: each "Undefined reference to 'S'
/// in 'L'" becomes devdl's "L: undefined device symbol `S`" (devdl names each input by its label),
/// ptxas's "Unresolved extern function 'S'" (after LTO) "undefined device symbol `S`"; other lines
/// are kept, without the driver's "error   : " prefixes.
std::string describeLinkLog(std::string_view log);

}  // namespace devdl::backend::cuda
