// A Level Zero device devdl links for. SPIR-V programs are made one of two ways, chosen by what
// the driver reports: one module of all the plan's images (ZE_experimental_module_program), as
// Intel's runtime does for optimization across modules; else a module per image, built as a
// library, linked with zeModuleDynamicLink over exactly the plan (Level Zero refuses partial and
// ambiguous links: interposition has made the losing definitions local first).
#pragma once

#include "backend/backend.h"
#include "backend/kernel_table.h"
#include "backend/level_zero/ze_api.h"

#include <llvm/Support/Error.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace devdl::backend::level_zero {

/// A linked program: its modules (one, or one per image linked together) and the kernels made
/// from them; released with this object.
class Program final : public backend::Program {
 public:
  Program(const Api &api, std::string device, ze_context_handle_t context, ze_device_handle_t deviceHandle)
      : api_(api),
        device_(std::move(device)),
        context_(context),
        deviceHandle_(deviceHandle),
        kernels_([&api](ze_kernel_handle_t kernel) { api.zeKernelDestroy(kernel); }) {}
  Program(const Program &) = delete;
  Program &operator=(const Program &) = delete;
  ~Program() override;

  /// Takes ownership of `module`.
  void add(ze_module_handle_t module) { modules_.push_back(module); }
  const std::vector<ze_module_handle_t> &modules() const { return modules_; }

  /// The calling thread's ze_kernel_handle_t from whichever module defines it, made on its first
  /// request and kept until it ends (a kernel holds its arguments: each thread sets its own).
  llvm::Expected<void *> kernel(std::string_view name) override;
  /// zeModuleGetGlobalPointer of the module that defines it.
  llvm::Expected<Extent> variable(std::string_view name) override;
  /// zeModuleGetFunctionPointer of the module that defines it.
  llvm::Expected<void *> function(std::string_view name) override;
  /// zeCommandListAppendMemoryCopy on an immediate, synchronous command list.
  llvm::Error copyVariable(std::string_view name, size_t offset, void *host, size_t size, bool toDevice) override;

 private:
  const Api &api_;
  std::string device_;
  ze_context_handle_t context_;
  ze_device_handle_t deviceHandle_;
  std::vector<ze_module_handle_t> modules_;
  ThreadKernelTable<ze_kernel_handle_t> kernels_;
};

class Device final : public backend::Device {
 public:
  /// The device DEVDL_DEVICE names (its index among every driver's devices, or a part of its
  /// name), else the first; its own new context.
  static llvm::Expected<std::unique_ptr<Device>> openDefault();
  /// The program's own driver, device and context (a new context where it gives none).
  static llvm::Expected<std::unique_ptr<Device>> attach(ze_driver_handle_t driver, ze_device_handle_t device,
                                                        ze_context_handle_t context);
  ~Device() override;

  int backend() const override;
  const std::string &name() const override { return name_; }
  std::string description() const override { return "Level Zero device " + name_; }
  /// SPIR-V of a version the device reads; a native binary the driver takes (built for its GPU).
  llvm::Error accepts(const DeviceImage &image) const override;
  llvm::Expected<std::unique_ptr<backend::Program>> link(std::span<const LinkInput> inputs,
                                                        std::string *binary) override;
  /// The modules' native binaries (zeModuleGetNativeBinary) as link() gave them, created with
  /// ZE_MODULE_FORMAT_NATIVE and linked again.
  llvm::Expected<std::unique_ptr<backend::Program>> load(std::string_view binary) override;
  const std::string &identity() const override { return identity_; }
  std::string_view linkMethod() const override;
  void native(devdl_native &out) const override;

 private:
  Device(const Api &api, ze_driver_handle_t driver, ze_device_handle_t device, ze_context_handle_t context,
         bool ownsContext);
  // link()'s phases past the inputs' (DriverInputs): one module of every image where the driver
  // has the module program (ZE_experimental_module_program), else a module each, linked by
  // zeModuleDynamicLink; then the program's native binary, for the disk cache.
  std::string buildFlags() const;
  llvm::Expected<std::unique_ptr<Program>> linkAsModuleProgram(std::span<const LinkInput> inputs) const;
  llvm::Expected<std::unique_ptr<Program>> linkModuleByModule(std::span<const LinkInput> inputs) const;
  /// devdl's binary of `program`: its modules' native binaries, each after its size.
  llvm::Error nativeBinaryOf(const Program &program, std::string &binary) const;
  /// zeModuleCreate, its build log in the error.
  llvm::Expected<ze_module_handle_t> create(const ze_module_desc_t &desc, std::string_view what) const;
  /// zeModuleDynamicLink of every module of `program`; `what` names them in the error.
  llvm::Error dynamicLink(Program &program, std::string_view what) const;
  /// Why a link of `inputs` (one module each, in `program`) failed, in devdl's words: each
  /// import whose defining image's module does not export it as the driver built it
  /// (zeModuleInspectLinkageExt); "" where the driver cannot say or everything is exported.
  std::string unexported(std::span<const LinkInput> inputs, const Program &program) const;

  const Api &api_;
  ze_driver_handle_t driver_;
  ze_device_handle_t device_;
  ze_context_handle_t context_;
  bool ownsContext_;
  std::string name_;
  std::string identity_;
  uint32_t spirvVersion_ = 0;  // ZE_MAKE_VERSION(major, minor) the device reads
  bool moduleProgram_ = false;  // ZE_experimental_module_program
  std::string options_;         // DEVDL_BUILD_OPTIONS, given to every module
};

}  // namespace devdl::backend::level_zero
