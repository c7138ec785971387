// An OpenCL device devdl links for: what it is and takes (DeviceInfo: capability detection,
// never vendor names; two driver defects that end the process are known by the driver's name),
// the programs built on it (ProgramBuilder) and how it links (Linker), joined as the loader's
// backend::Device (Device).
#pragma once

#include "backend/backend.h"
#include "backend/kernel_table.h"
#include "backend/opencl/host_variables.h"
#include "backend/opencl/opencl_api.h"
#include "backend/opencl/spirv_extensions.h"
#include "backend/partition.h"
#include "backend/spirv/translation.h"
#include "support/debug.h"

#include <llvm/ADT/StringMap.h>

#include <llvm/Support/Error.h>

#include <array>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace devdl::backend::opencl {

/// What a device can take, read from its info queries.
struct Capabilities {
  bool spirvIl = false;  // CL_DEVICE_IL_VERSION lists SPIR-V: clCreateProgramWithIL
  bool spir = false;     // cl_khr_spir: SPIR 1.2 bitcode through clCreateProgramWithBinary("-x spir")
  bool linker = false;   // CL_DEVICE_LINKER_AVAILABLE: clCompileProgram / clLinkProgram
  bool hostMemory = false;  // a CPU device with CL_DEVICE_HOST_UNIFIED_MEMORY: its addresses are the host's
  // cl_intel_unified_shared_memory, and the entry points of it and of
  // cl_intel_global_variable_pointers given by the platform: the driver gives the addresses of
  // program variables
  bool variablePointers = false;
};

/// An OpenCL device as devdl opened it: its handles, what it takes, read from its info queries when
/// it is opened (the driver's answers do not change), and what devdl chose for it from those.
struct DeviceInfo {
  DeviceInfo(const Api &api, cl_platform_id platform, cl_device_id id, cl_context context);

  /// Whether link() moves a program's variables to host memory (HostVariables): on a CPU device
  /// sharing the host's memory, where devdl translates to SPIR (PoCL builds each kernel apart).
  /// Not where the driver gives their addresses itself.
  bool placesVariables() const { return caps.hostMemory && !caps.spirvIl && !caps.variablePointers; }
  /// Whether its links run the SPIR-V translator (linkMethod): a helper process's work.
  bool translates() const;
  /// Whether link() adds devdl's copy kernels: where the host has no other way to a variable.
  bool copiesThroughKernels() const { return !placesVariables() && !caps.variablePointers; }
  /// How link() links on this device, for DEVDL_DEBUG and the identity.
  std::string_view linkMethod() const;

  const Api &api;
  cl_platform_id platform;
  cl_device_id id;
  cl_context context;  // released by the Device that opened it
  std::string name;
  Capabilities caps;
  AspectSet aspects;  // as SYCL's OpenCL backend derives them from the device's answers
  std::optional<std::vector<std::string>> spirvExtensions;  // spirvExtensionsTaken, where caps.spirvIl
  VariablePointers pointers;  // where caps.variablePointers
  std::string options;  // DEVDL_BUILD_OPTIONS, given to every compile and build
  bool lto = false;     // the optimization across images of the software link, DEVDL_LTO=1
  // PoCL (3.1) makes a program's binary by compiling each kernel into a directory named after it,
  // and ends the process where that name is longer than a file name may be (NAME_MAX; DPC++'s
  // mangled kernel names often are): such a program's binary is not asked for there.
  size_t binaryKernelNameBound = SIZE_MAX;
  std::string identity;  // backend::Device::identity
};

/// A built program, and the kernels made from it; released with this object.
class Program final : public backend::Program {
 public:
  /// `pointers`: where the device has Intel's variable pointers (Capabilities), else none.
  Program(const Api &api, cl_program program, std::string device, cl_device_id id, VariablePointers pointers = {})
      : api_(api),
        program_(program),
        device_(std::move(device)),
        id_(id),
        pointers_(pointers),
        kernels_([&api](cl_kernel kernel) { api.clReleaseKernel(kernel); }) {}
  Program(const Program &) = delete;
  Program &operator=(const Program &) = delete;
  ~Program() override;
  cl_program get() const { return program_; }

  /// The variables its kernels address in host memory, kept while it lives.
  void holdVariables(std::unique_ptr<HostVariables> variables) { variables_ = std::move(variables); }
  const HostVariables *hostVariables() const { return variables_.get(); }

  /// The calling thread's cl_kernel, made on its first request and kept until it ends (a
  /// cl_kernel holds its arguments: each thread sets its own); an error naming the kernel.
  llvm::Expected<void *> kernel(std::string_view name) override;
  /// Its address in host memory, where devdl placed it there; else the driver's device address,
  /// where it gives those (clGetDeviceGlobalVariablePointerINTEL); else an error.
  llvm::Expected<Extent> variable(std::string_view name) override;
  llvm::Expected<void *> function(std::string_view name) override;
  /// Directly in host memory, where devdl placed it there; else at the driver's address with
  /// clEnqueueMemcpyINTEL, where it gives one; else through devdl's copy kernel linked into the
  /// program (copyKernels).
  llvm::Error copyVariable(std::string_view name, size_t offset, void *host, size_t size, bool toDevice) override;

 private:
  /// The driver's address and size of a variable (clGetDeviceGlobalVariablePointerINTEL).
  llvm::Expected<std::pair<void *, size_t>> driverAddress(std::string_view name) const;
  /// A command queue of the program's context (`context`) on its device, for a copy; the caller
  /// releases it.
  llvm::Expected<cl_command_queue> copyQueue(cl_context &context) const;
  /// copyVariable's ways to a variable the program does not hold in host memory: at the driver's
  /// address, copied as USM; through devdl's copy kernel linked into the program.
  llvm::Error copyAtDriverAddress(std::string_view name, size_t offset, void *host, size_t size, bool toDevice);
  llvm::Error copyThroughKernel(std::string_view name, size_t offset, void *host, size_t size, bool toDevice);

  const Api &api_;
  cl_program program_;
  std::string device_;
  cl_device_id id_;
  VariablePointers pointers_;  // the driver's, where it gives variables' addresses
  ThreadKernelTable<cl_kernel> kernels_;
  std::unique_ptr<HostVariables> variables_;  // unmapped after the program is released
};

/// A program linked in parts (backend/partition.h), each built as a program of its own in a helper
/// process of its own (Linker::linkParts): each kernel and variable is the one of the part that
/// holds it, which is the one its kernels use. A name no part holds is asked of the first part.
class ProgramOfParts final : public backend::Program {
 public:
  /// `names[i]`: the kernels and variables part `parts[i]` answers for.
  ProgramOfParts(std::vector<std::unique_ptr<opencl::Program>> parts, std::vector<std::vector<std::string>> names);
  const std::vector<std::unique_ptr<opencl::Program>> &parts() const { return parts_; }
  const std::vector<std::vector<std::string>> &names() const { return names_; }

  llvm::Expected<void *> kernel(std::string_view name) override { return partOf(name).kernel(name); }
  llvm::Expected<Extent> variable(std::string_view name) override { return partOf(name).variable(name); }
  llvm::Expected<void *> function(std::string_view name) override { return partOf(name).function(name); }
  llvm::Error copyVariable(std::string_view name, size_t offset, void *host, size_t size, bool toDevice) override {
    return partOf(name).copyVariable(name, offset, host, size, toDevice);
  }

 private:
  opencl::Program &partOf(std::string_view name) const;
  std::vector<std::unique_ptr<opencl::Program>> parts_;
  std::vector<std::vector<std::string>> names_;
  llvm::StringMap<size_t> owner_;
};

/// The SPIR-V a program's kernels reach below which it is linked whole: a helper process costs
/// some 60 ms to start and open the driver, where Intel's CPU runtime compiles 64 KiB of small
/// kernels (256 of 256 bytes) in about a second.
inline constexpr uint64_t kSpirvForParts = 64 * 1024;
/// The SPIR-V the images of a program bring for each part at most: each helper holds the driver
/// (some 250 MB with Intel's CPU runtime), so their number follows the work, not the cores alone.
inline constexpr uint64_t kSpirvPerPart = 32 * 1024;

/// The most kernels a program built from SPIR on a device that compiles each kernel at its first
/// launch (PoCL) is stored with the driver's binary for: asking for it compiles every kernel (some
/// 40 ms each here, 40 s for 1,000), so past this the SPIR is stored (kStoredSpir).
inline constexpr size_t kKernelsForDriverBinary = 16;

/// Programs built on an OpenCL device: from one SPIR-V module as IL, from SPIR, from a binary (a
/// native object, a stored program); and the binary a linked program is stored as, and loaded
/// from, in the disk cache.
class ProgramBuilder {
 public:
  explicit ProgramBuilder(const DeviceInfo &device) : device_(device) {}

  /// Builds SPIR 1.2 bitcode; a failed build's error carries the build log.
  llvm::Expected<std::unique_ptr<Program>> buildSpir(std::string_view bitcode, std::string_view options = {}) const;
  /// Builds one (linked) SPIR-V module as IL, its specialization constants set.
  llvm::Expected<std::unique_ptr<Program>> buildIl(std::span<const uint32_t> words, const SpecConstants &specs = {}) const;
  /// clCreateProgramWithBinary and clBuildProgram with `options`; `what` the binary is, for
  /// errors ("SPIR", "a cached program"), which carry the build log.
  llvm::Expected<std::unique_ptr<Program>> buildBinary(std::string_view binary, const std::string &options,
                                                       std::string_view what) const;
  /// A native binary as this device's compiled object, or why the device does not take it (no
  /// linker, or the driver refuses the binary).
  llvm::Expected<std::unique_ptr<Program>> nativeObject(Bytes binary) const;
  /// Sets specialization constants of an IL program (clSetProgramSpecializationConstant).
  llvm::Error specialize(cl_program program, const SpecConstants &specs) const;
  /// `program`, owned, with what this device gives its variables.
  std::unique_ptr<Program> own(cl_program program) const;

  /// The driver's binary of one program, or why there is none.
  llvm::Expected<std::string> driverBinary(const Program &program) const;
  /// The linked program's binary, for the disk cache; empty, saying why under
  /// DEVDL_DEBUG=statistics, where the driver cannot give it (or cannot without ending the process).
  /// `spir`: the bitcode it was built from, on the SPIR path; on a device that compiles each kernel
  /// at its first launch, that is stored instead where the driver's binary would compile more than
  /// kKernelsForDriverBinary kernels, or cannot be made.
  std::string binaryOf(const backend::Program &program, std::string_view spir = {}) const;
  /// clCreateProgramWithBinary and clBuildProgram of a binary binaryOf gave.
  llvm::Expected<std::unique_ptr<backend::Program>> load(std::string_view binary) const;

 private:
  /// The programs of a stored program of parts, built.
  llvm::Expected<std::unique_ptr<backend::Program>> loadParts(std::string_view packed) const;
  /// clCreateProgramWithBinary, checked (the binary's status too).
  llvm::Expected<std::unique_ptr<Program>> fromBinary(Bytes binary) const;

  const DeviceInfo &device_;
};

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

/// The loader's OpenCL device (backend::Device): what it is and takes (DeviceInfo), the programs
/// built on it (ProgramBuilder) and how it links (Linker).
class Device final : public backend::Device {
 public:
  /// The first device, over all platforms, that has a compiler, or the one DEVDL_DEVICE names
  /// (its index among those devices, or a part of its name); its own new context.
  static llvm::Expected<std::unique_ptr<Device>> openDefault();
  /// The program's own device and context (retained while this object lives); context null: its
  /// own new one on that device.
  static llvm::Expected<std::unique_ptr<Device>> attach(cl_device_id device, cl_context context);
  ~Device() override;

  cl_device_id id() const { return info_.id; }
  cl_context context() const { return info_.context; }
  const Capabilities &capabilities() const { return info_.caps; }

  int backend() const override;
  const std::string &name() const override { return info_.name; }
  std::string description() const override { return "OpenCL device " + info_.name; }
  /// SPIR-V, on a device that takes it as IL (each extension it declares one the device takes,
  /// where that is known: spirvExtensionsTaken) or through SPIR; a native binary the driver
  /// takes, on a device with a linker.
  llvm::Error accepts(const DeviceImage &image) const override;
  /// The inputs prepared (DriverInputs), then linked (Linker::link).
  llvm::Expected<std::unique_ptr<backend::Program>> link(std::span<const LinkInput> inputs,
                                                        std::string *binary) override;
  /// ProgramBuilder::load.
  llvm::Expected<std::unique_ptr<backend::Program>> load(std::string_view binary) override {
    return builder_.load(binary);
  }
  const std::string &identity() const override { return info_.identity; }
  std::string_view linkMethod() const override { return info_.linkMethod(); }
  void native(devdl_native &out) const override;
  /// Not with the program's variables placed in host memory: its binary holds their address.
  bool binaryLoadsOnAnotherDevice() const override { return !info_.placesVariables(); }

  // The steps of its builds and links that devdl-translate and the tests take one at a time.
  llvm::Expected<std::unique_ptr<Program>> buildSpir(std::string_view bitcode, std::string_view options = {}) const {
    return builder_.buildSpir(bitcode, options);
  }
  llvm::Expected<std::string> driverBinary(const Program &program) const { return builder_.driverBinary(program); }
  llvm::Expected<std::unique_ptr<Program>> linkObjects(std::span<const LinkInput> inputs) const {
    return linker_.linkObjects(inputs);
  }
  std::vector<ProgramPart> planParts(std::span<const LinkInput> inputs, unsigned jobs, std::string *why) const {
    return linker_.planParts(inputs, jobs, why);
  }
  llvm::Expected<std::unique_ptr<ProgramOfParts>> linkParts(std::span<const LinkInput> inputs,
                                                            std::span<const ProgramPart> parts) const {
    return linker_.linkParts(inputs, parts);
  }

 private:
  // openDefault's choice among the platforms' devices.
  static llvm::Expected<std::unique_ptr<Device>> openChosen(const Api &cl);
  Device(const Api &api, cl_platform_id platform, cl_device_id device, cl_context context);

  DeviceInfo info_;
  ProgramBuilder builder_;  // over info_
  Linker linker_;           // over info_ and builder_
};

}  // namespace devdl::backend::opencl
