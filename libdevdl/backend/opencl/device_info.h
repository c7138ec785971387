// What an OpenCL device devdl links for is and takes (DeviceInfo): capability detection, never
// vendor names; two driver defects that end the process are known by the driver's name.
#pragma once

#include "backend/opencl/opencl_api.h"
#include "image/aspects.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
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

}  // namespace devdl::backend::opencl
