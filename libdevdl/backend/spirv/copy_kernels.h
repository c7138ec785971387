// devdl's copy kernels: for a device whose driver gives no addresses of a program's variables,
// a SPIR-V module of kernels through which the host reads and writes them, linked with the
// images (by devdl's link or by the driver's own). Made from the image that defines the
// variables, by the translator: each import must have the type of its definition.
#pragma once

#include <llvm/Support/Error.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace devdl::backend {

/// The kernel of devdl's that copies `variable` between the host and the device (copyKernels):
/// (uchar *buffer, ulong offset, ulong size, int toDevice) stores the variable's size (a ulong) in
/// buffer[0, 8) and, where [offset, offset + size) lies inside it, copies those bytes between the
/// variable and buffer[8, 8 + size): into it when toDevice.
std::string copyKernelName(std::string_view variable);

/// A SPIR-V module of devdl's with the copy kernel (copyKernelName) of each of `variables` that
/// `definer` (a SPIR-V image's words) exports, importing them: linked with the images, by the
/// software link or by the device's own linker, it lets the host read and write the variables
/// where the driver gives no addresses of them. The translator runs in a helper process
/// (spirv/translator_process.h). Fails without the SPIRV-LLVM-Translator
/// (DEVDL_PORTABLE), where `definer` exports none of them, and where the translator cannot read
/// the image or write the module.
llvm::Expected<std::vector<uint32_t>> copyKernels(std::span<const uint32_t> definer,
                                                  std::span<const std::string> variables);

/// The same, in this process (what the translator helper runs; copyKernels runs it there).
namespace inProcess {
llvm::Expected<std::vector<uint32_t>> copyKernels(std::span<const uint32_t> definer,
                                                  std::span<const std::string> variables);
}

}  // namespace devdl::backend
