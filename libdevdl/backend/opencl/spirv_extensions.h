// The SPIR-V extensions an OpenCL device takes as IL, where devdl can know them. Intel's OpenCL
// CPU runtime ends the process (exit 10: "InvalidModule: ... uses unknown extension") when a
// module declares one it does not know, where PoCL refuses such a module with an error: a module
// goes to a device as IL only where each extension it declares is one the device reports
// (cl_khr_spirv_queries) or one its driver is known to take.
#pragma once

#include "backend/opencl/opencl_api.h"

#include <optional>
#include <string>
#include <vector>

namespace devdl::backend::opencl {

/// What the device takes: the extensions it reports (CL_DEVICE_SPIRV_EXTENSIONS_KHR) and those its
/// driver is known to take beside them (Intel's CPU runtime reports 9 of the 99 it takes).
/// nullopt where it reports none and devdl knows no list of its driver's: such a driver has each
/// module as it is, and says itself what it does not take.
std::optional<std::vector<std::string>> spirvExtensionsTaken(const Api &api, cl_platform_id platform,
                                                             cl_device_id device);

}  // namespace devdl::backend::opencl
