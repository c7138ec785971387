// How an OpenCL device links a plan's images (Linker): the driver's link, a large program in
// parts, or devdl's software link, by what the device can take.
#pragma once

#include "backend/backend.h"
#include "backend/opencl/device_info.h"
#include "backend/opencl/opencl_program.h"
#include "backend/partition.h"
#include "backend/spirv/translation.h"
#include "support/debug.h"

#include <llvm/Support/Error.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace devdl::backend::opencl {

class ProgramBuilder;

/// The SPIR-V a program's kernels reach below which it is linked whole: a helper process costs
/// some 60 ms to start and open the driver, where Intel's CPU runtime compiles 64 KiB of small
/// kernels (256 of 256 bytes) in about a second.
inline constexpr uint64_t kSpirvForParts = 64 * 1024;
/// The SPIR-V the images of a program bring for each part at most: each helper holds the driver
/// (some 250 MB with Intel's CPU runtime), so their number follows the work, not the cores alone.
inline constexpr uint64_t kSpirvPerPart = 32 * 1024;

/// How an OpenCL device links a plan's images, past the first phases every backend shares
/// (DriverInputs): devdl's copy kernels added, then the driver's link (IL compiled and linked by
/// the driver, a large program in parts) or devdl's (the software link, built as IL or translated
/// to SPIR).
class Linker {
 public:
  Linker(const DeviceInfo &device, const ProgramBuilder &builder) : device_(device), builder_(builder) {}

  /// Links `inputs`, the plan's as DriverInputs prepared them (devdl's copy kernels join them):
  /// IL + clCompileProgram/clLinkProgram where the device has both; else the software link,
  /// built as IL where the device takes it, else translated to SPIR; with DEVDL_LTO=1, optimized
  /// across the images (optimizeSpirv, spirvToSpir). With `binary`, the program's (binaryOf).
  llvm::Expected<std::unique_ptr<backend::Program>> link(std::vector<LinkInput> &inputs, std::string *binary) const;
  /// Compiles each SPIR-V image as IL, takes each native binary as the compiled object it is,
  /// and links the objects with the device's own linker.
  llvm::Expected<std::unique_ptr<Program>> linkObjects(std::span<const LinkInput> inputs) const;
  /// The parts `inputs` may be linked in for `jobs` processes (linkParts): one, with why in `why`,
  /// where an input is a native binary or has specialization constants set, the build has no
  /// helper, or the kernels cannot be separated.
  std::vector<ProgramPart> planParts(std::span<const LinkInput> inputs, unsigned jobs, std::string *why) const;
  /// Each part's images cut to it (spirvForPart), compiled and linked by the driver in a helper
  /// process of its own (devdl-translate), all at once, and the binaries built here. Fails as the
  /// first part (in order) that fails.
  llvm::Expected<std::unique_ptr<ProgramOfParts>> linkParts(std::span<const LinkInput> inputs,
                                                            std::span<const ProgramPart> parts) const;

 private:
  /// devdl's copy kernels of a link, one module for each image: they live for the link.
  struct CopyKernels {
    std::deque<std::shared_ptr<const std::vector<uint32_t>>> words;
    std::deque<DeviceImage> images;
  };
  /// Adds to `inputs` a module of copy kernels for each SPIR-V image exporting variables (those the
  /// link sees), where the host has no other way to them; one that cannot be made is passed over,
  /// said under DEVDL_DEBUG=statistics.
  void addCopyKernels(std::vector<LinkInput> &inputs, CopyKernels &copying) const;
  /// The inputs compiled and linked by the driver: as one program, or a large one in parts.
  llvm::Expected<std::unique_ptr<backend::Program>> linkByDriver(std::span<const LinkInput> inputs) const;
  /// devdl's software link, built as IL (optimized across the images with DEVDL_LTO=1) or as SPIR,
  /// whose bitcode goes to `spirBuilt`.
  llvm::Expected<std::unique_ptr<backend::Program>> linkBySoftware(std::span<const LinkInput> inputs,
                                                                   std::string &spirBuilt) const;
  /// The linked module translated to SPIR (the program's variables placed in host memory where
  /// this device builds each kernel apart) and built.
  llvm::Expected<std::unique_ptr<backend::Program>> buildLinkedAsSpir(const std::vector<uint32_t> &linked,
                                                                      const std::vector<SpecConstant> &values,
                                                                      std::span<const LinkInput> inputs,
                                                                      std::string &spirBuilt, CallTimes &times) const;
  /// devdl's copy kernels for `variables` of SPIR-V `image` (copyKernels), made once for each
  /// image and names: a library linked into many programs has them made once (the translator
  /// takes milliseconds). The last kCopyKernelsKept are kept.
  llvm::Expected<std::shared_ptr<const std::vector<uint32_t>>> copyKernelsFor(const DeviceImage &image,
                                                                           std::span<const std::string> variables) const;
  static constexpr size_t kCopyKernelsKept = 256;

  const DeviceInfo &device_;
  const ProgramBuilder &builder_;
  mutable std::mutex copyKernelsMutex_;  // builds run on many threads
  mutable std::map<std::array<uint64_t, 3>, std::shared_ptr<const std::vector<uint32_t>>> copyKernels_;
};

}  // namespace devdl::backend::opencl
