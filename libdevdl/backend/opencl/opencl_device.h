// The loader's OpenCL device (Device): what it is and takes (device_info.h), the programs built on
// it (program_builder.h) and how it links (linker.h), joined as backend::Device.
#pragma once

#include "backend/backend.h"
#include "backend/opencl/device_info.h"
#include "backend/opencl/linker.h"
#include "backend/opencl/opencl_api.h"
#include "backend/opencl/opencl_program.h"
#include "backend/opencl/program_builder.h"
#include "backend/partition.h"

#include <llvm/Support/Error.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace devdl::backend::opencl {

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
