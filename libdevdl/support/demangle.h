// C++ demangling bounded for names read from untrusted images. LLVM's demangler recurses once
// for each level of nesting (each `P` of `_Z1fPPP...i`), about 100 bytes of stack a level: a
// name of 100,000 characters overflows any stack. Longer names than devdl demangles stay as they
// are; real ones are far shorter (template-heavy SYCL kernel names run to a few hundred).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace devdl {

/// The longest name devdl demangles: at most about 200 KB of stack, in any thread.
inline constexpr size_t kMaxDemangledLength = 2048;

/// `name` demangled, or as it is when it is not a mangled C++ name or is longer than
/// kMaxDemangledLength.
std::string demangle(std::string_view name);

/// The base name of a mangled function (`__spirv_ocl_printf` of `_Z18__spirv_ocl_printfPU3AS2ci`),
/// or nullopt when `name` is not one devdl demangles.
std::optional<std::string> mangledBaseName(std::string_view name);

}  // namespace devdl
