// A CUDA device devdl links for through the driver API: which images it can run (the driver's
// architecture rules), and a LinkPlan linked with cuLink* into one module, since CUDA code in
// separately loaded modules cannot call each other.
#pragma once

#include "backend/backend.h"
#include "backend/cuda/architecture.h"
#include "backend/cuda/cuda_api.h"
#include "backend/kernel_table.h"
#include "backend/cuda/nvjitlink.h"
#include "backend/cuda/program_parts.h"
#include "backend/cuda/toolkit.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/Support/Error.h>

#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace devdl::backend::cuda {

/// The kernel devdl links into a program a runtime loads (RuntimeLoad): the runtime finds the
/// module by it.
inline constexpr const char *kRuntimeAnchor = "__devdl_runtime_anchor";

/// A linked program: one module, or one for each part of an LTO link split across threads
/// (program_parts.h), each answering for the names of its part; the kernels found in them.
/// Unloaded with this object.
class Program final : public backend::Program {
 public:
  /// `owners`: the module of each name, where there are several; names it lacks are the first's.
  /// `runtimes`: the modules are a runtime's (RuntimeLoad), which unloads them, not this object.
  Program(const Api &api, CUcontext context, std::vector<CUmodule> modules, llvm::StringMap<unsigned> owners,
          std::string device, bool runtimes = false)
      : api_(api), context_(context), modules_(std::move(modules)), owners_(std::move(owners)),
        device_(std::move(device)), runtimes_(runtimes) {}
  Program(const Program &) = delete;
  Program &operator=(const Program &) = delete;
  ~Program() override;

  llvm::Expected<void *> kernel(std::string_view name) override;          // CUfunction; thread-safe
  llvm::Expected<Extent> variable(std::string_view name) override;        // at a CUdeviceptr
  /// From the program's table of its functions (function_table.h), where it has one.
  llvm::Expected<void *> function(std::string_view name) override;
  /// cuMemcpyHtoD / cuMemcpyDtoH at the variable's cuModuleGetGlobal address.
  llvm::Error copyVariable(std::string_view name, size_t offset, void *host, size_t size, bool toDevice) override;

 private:
  /// cuModuleGetGlobal: the variable's address and size (the caller has made the context current).
  llvm::Expected<std::pair<CUdeviceptr, size_t>> global(std::string_view name);
  CUmodule moduleOf(std::string_view name) const;

  const Api &api_;
  CUcontext context_;
  std::vector<CUmodule> modules_;
  llvm::StringMap<unsigned> owners_;
  std::string device_;
  bool runtimes_;
  KernelTable<CUfunction> kernels_;
  std::once_flag functionsRead_;  // the table, read at the first function()
  llvm::StringMap<void *> functions_;
  std::string noFunctions_;  // where the table cannot be read, why
};

class Device final : public backend::Device {
 public:
  /// The context current on the calling thread, else the primary context of the device
  /// DEVDL_DEVICE names (its index, or a part of its name), else of device 0.
  static llvm::Expected<std::unique_ptr<Device>> openDefault();
  /// The program's own device and context; with a null context, the device's primary context.
  /// A context of the program's must outlive devdl's use of it.
  static llvm::Expected<std::unique_ptr<Device>> attach(CUdevice device, void *context);
  ~Device() override;

  int backend() const override;
  const std::string &name() const override { return name_; }
  std::string description() const override { return "CUDA device " + name_; }
  int computeCapability() const { return sm_; }
  llvm::Error accepts(const DeviceImage &image) const override;
  /// Links the images into one cubin, with nvJitLink -lto where a fatbin carries LTO-IR for this
  /// device and nvJitLink is found (see linkMethod), with nvJitLink too where the link compiles
  /// 64 KB of PTX or more and DEVDL_JOBS is over 1 (its ptxas compiles on as many threads), else
  /// with the driver's cuLink; then cuModuleLoadData. Each image goes as it is, a fatbin as its
  /// best member for this device, or whole where nvJitLink optimizes its LTO-IR with the others'.
  /// An LTO link whose kernels can be split (program_parts.h) is linked as one module per part on
  /// DEVDL_JOBS threads; one that cannot be, with nvJitLink's and ptxas's split compilation on as
  /// many.
  llvm::Expected<std::unique_ptr<backend::Program>> link(std::span<const LinkInput> inputs,
                                                        std::string *binary) override;
  /// cuModuleLoadData of a linked cubin, or of each module of a program linked in parts.
  llvm::Expected<std::unique_ptr<backend::Program>> load(std::string_view binary) override;
  /// As link(), into one cubin, with the kernel kRuntimeAnchor linked in.
  llvm::Expected<std::string> linkForRuntime(std::span<const LinkInput> inputs) override;
  /// The module of the CUfunction the runtime gives (cuFuncGetModule), in the device's context.
  llvm::Expected<std::unique_ptr<backend::Program>> loadThrough(std::string_view binary,
                                                               const RuntimeLoad &runtime) override;
  /// Names the linkers the device may use (nvJitLink by its file's path, size and mtime: any
  /// change to it changes the disk cache's key) and whether LTO is on.
  const std::string &identity() const override { return identity_; }
  /// cuLink, and nvJitLink for programs with LTO-IR or much PTX where findNvJitLink finds it; with
  /// DEVDL_CUDA_LINKER=culink cuLink alone, =nvjitlink nvJitLink for every program (required).
  /// DEVDL_LTO=0 links LTO-IR images from their PTX instead.
  std::string_view linkMethod() const override { return linkers_.method; }
  void native(devdl_native &out) const override;

 private:
  Device(const Api &api, CUdevice device, CUcontext context, bool primary);

  struct ReadyInputs;  // what the driver is given (cuda_link.cpp)

  /// link()'s binary: one cubin, or the modules of a program linked in parts (packModules); one
  /// cubin with kRuntimeAnchor in it `forRuntime`. Its phases are in cuda_link.cpp.
  llvm::Expected<std::string> linkBinary(std::span<const LinkInput> given, bool forRuntime);
  // The fatbin `input` as the member of it this device is given, read into `scratch`; none where
  // it goes whole (its LTO-IR optimized with the others', `ltoIr` then set; its member in NVIDIA's
  // compression) or is no fatbin.
  llvm::Expected<std::optional<DeviceImage>> memberFor(const LinkInput &input, Storage &scratch, bool &ltoIr) const;
  // What devdl links in beside the images: its table of the images' functions, the runtime's
  // anchor kernel `forRuntime`, the device runtime where an image needs it.
  llvm::Error addDevdlInputs(ReadyInputs &ready, std::span<const LinkInput> inputs, bool ltoIr,
                            bool forRuntime) const;
  // The driver's cuLink over inputs made ready, of a plan of `images`: one cubin.
  llvm::Expected<std::string> linkWithCuLink(std::span<const JitInput> ready, size_t images) const;
  // The nvJitLink path of linkBinary, from inputs made ready as for cuLink, on `threads`
  // (DEVDL_JOBS): one cubin, or (unless `whole`) the modules of a program linked in parts.
  llvm::Expected<std::string> linkWithJit(std::span<const JitInput> inputs, bool lto, unsigned threads,
                                          bool whole) const;
  // The modules of a program linked in parts, loaded, each answering for its part's names.
  llvm::Expected<std::unique_ptr<backend::Program>> loadModules(std::span<const PartModule> modules);

  /// The linkers the device may use, as found when it was opened.
  struct Linkers {
    std::optional<NvJitLinkFile> jitLink;            // nvJitLink, where the device may link with it
    std::optional<DeviceRuntimeFile> deviceRuntime;  // libcudadevrt.a, where the toolkit has it
    bool jitAlways = false;                          // DEVDL_CUDA_LINKER=nvjitlink: for every program
    std::string error;  // why not, where DEVDL_CUDA_LINKER=nvjitlink asked for it
    bool lto = true;
    std::string method;  // linkMethod()
  };

  const Api &api_;
  CUdevice device_;
  CUcontext context_;
  bool primary_;  // a primary context devdl retained, released with this object
  int sm_ = 0;
  std::string name_;
  Linkers linkers_;
  std::string identity_;  // made when the device is opened: the driver's answers do not change
};

}  // namespace devdl::backend::cuda
