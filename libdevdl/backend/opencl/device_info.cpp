// What an OpenCL device can take, read from its info queries (DeviceInfo), how devdl links on it,
// and the identity its programs are cached under.
#include "backend/opencl/device_info.h"
#include "backend/opencl/host_variables.h"
#include "backend/opencl/opencl_info.h"
#include "backend/opencl/spirv_extensions.h"
#include "backend/spirv/translation.h"
#include "backend/spirv/translator_command.h"
#include "support/environment.h"
#include "support/version.h"

#include <climits>
#include <string>

namespace devdl::backend::opencl {

namespace {

// The aspects as SYCL's OpenCL backend derives them from the device's answers.
AspectSet aspectsOf(const Api &api, cl_device_id device, const std::string &extensions, cl_device_type type,
                    const Capabilities &caps) {
  AspectSet aspects;
  aspects[aspect::cpu] = type & CL_DEVICE_TYPE_CPU;
  aspects[aspect::gpu] = type & CL_DEVICE_TYPE_GPU;
  aspects[aspect::accelerator] = type & CL_DEVICE_TYPE_ACCELERATOR;
  aspects[aspect::custom] = type & CL_DEVICE_TYPE_CUSTOM;
  aspects[aspect::fp16] = hasWord(extensions, "cl_khr_fp16");
  aspects[aspect::fp64] = deviceValue<cl_device_fp_config>(api, device, CL_DEVICE_DOUBLE_FP_CONFIG) != 0;
  aspects[aspect::int64_base_atomics] = hasWord(extensions, "cl_khr_int64_base_atomics");
  aspects[aspect::int64_extended_atomics] = hasWord(extensions, "cl_khr_int64_extended_atomics");
  aspects[aspect::atomic64] = aspects[aspect::int64_base_atomics] && aspects[aspect::int64_extended_atomics];
  aspects[aspect::image] = deviceValue<cl_bool>(api, device, CL_DEVICE_IMAGE_SUPPORT);
  aspects[aspect::online_compiler] = deviceValue<cl_bool>(api, device, CL_DEVICE_COMPILER_AVAILABLE);
  aspects[aspect::online_linker] = caps.linker;
  aspects[aspect::queue_profiling] = true;  // every OpenCL device profiles its queues
  const bool usm = hasWord(extensions, "cl_intel_unified_shared_memory");
  aspects[aspect::usm_device_allocations] = usm;
  aspects[aspect::usm_host_allocations] = usm;
  aspects[aspect::usm_shared_allocations] = usm;
  return aspects;
}

}  // namespace

DeviceInfo::DeviceInfo(const Api &api, cl_platform_id platform, cl_device_id id, cl_context context)
    : api(api), platform(platform), id(id), context(context) {
  name = deviceString(api, id, CL_DEVICE_NAME);
  if (platformString(api, platform, CL_PLATFORM_NAME) == "Portable Computing Language")
    binaryKernelNameBound = NAME_MAX;
  const std::string extensions = deviceString(api, id, CL_DEVICE_EXTENSIONS);
  caps.spirvIl = deviceString(api, id, CL_DEVICE_IL_VERSION).find("SPIR-V") != std::string::npos;
  if (caps.spirvIl) spirvExtensions = spirvExtensionsTaken(api, platform, id);
  caps.spir = hasWord(extensions, "cl_khr_spir");
  caps.linker = deviceValue<cl_bool>(api, id, CL_DEVICE_LINKER_AVAILABLE);
  const auto type = deviceValue<cl_device_type>(api, id, CL_DEVICE_TYPE);
  caps.hostMemory = (type & CL_DEVICE_TYPE_CPU) && deviceValue<cl_bool>(api, id, CL_DEVICE_HOST_UNIFIED_MEMORY);
  // Variables at the driver's addresses where the device has USM and its platform gives
  // clGetDeviceGlobalVariablePointerINTEL, whether or not the device names
  // cl_intel_global_variable_pointers: Intel's CPU runtime gives it without naming it, and
  // DPC++'s OpenCL adapter asks for the entry point alone.
  if (hasWord(extensions, "cl_intel_unified_shared_memory")) {
    auto entry = [&](const char *name) { return api.clGetExtensionFunctionAddressForPlatform(platform, name); };
    pointers.clGetDeviceGlobalVariablePointerINTEL =
        reinterpret_cast<VariablePointers::GetPointer>(entry("clGetDeviceGlobalVariablePointerINTEL"));
    pointers.clEnqueueMemcpyINTEL = reinterpret_cast<VariablePointers::Memcpy>(entry("clEnqueueMemcpyINTEL"));
    caps.variablePointers = pointers.clGetDeviceGlobalVariablePointerINTEL && pointers.clEnqueueMemcpyINTEL;
    if (!caps.variablePointers) pointers = {};  // both, or neither
  }
  aspects = aspectsOf(api, id, extensions, type, caps);
  if (const char *given = devdlVariable("DEVDL_BUILD_OPTIONS")) options = given;
  // Asked for alone (DEVDL_LTO=1): the driver compiles the one linked module it is given, and
  // inlines across what were images itself (PoCL: the same kernel times with and without, and
  // LLVM's -O2 here cost 5% of the seed's first kernel; bench/README.md).
  const char *ltoAsked = devdlVariable("DEVDL_LTO");
  lto = ltoAsked && std::string_view(ltoAsked) == "1" && hasTranslatorHelper();  // LLVM does it, through the translator
  identity = "OpenCL\n" + platformString(api, platform, CL_PLATFORM_NAME) + "\n" +
             platformString(api, platform, CL_PLATFORM_VERSION) + "\n" + name + "\n" +
             deviceString(api, id, CL_DEVICE_VERSION) + "\n" + deviceString(api, id, CL_DRIVER_VERSION) + "\n" +
             std::string(linkMethod()) + "\noptions " + options + "\nvariables " +
             (placesVariables()        ? "in host memory"
              : caps.variablePointers ? "at the driver's addresses"
                                      : "copied by devdl's kernels") + "\nstored program format " +
             std::to_string(kStoredProgramVersion) + "\n" + devdlBuild();
}

std::string_view DeviceInfo::linkMethod() const {
  // A large program is linked in parts, each in a helper, where the build has the helper.
  if (caps.spirvIl && caps.linker && hasTranslatorHelper())
    return "SPIR-V IL, clCompileProgram, clLinkProgram; a large program in parts, in helper processes";
  if (caps.spirvIl) return caps.linker ? "SPIR-V IL, clCompileProgram, clLinkProgram"
                                       : lto ? "SPIRV-Tools link, LLVM -O2 across images, SPIR-V IL, clBuildProgram"
                                             : "SPIRV-Tools link, SPIR-V IL, clBuildProgram";
  if (!hasTranslatorHelper() && translatorCommand()) {  // the identity names the translator that makes the SPIR
    static const std::string byCommand = "SPIRV-Tools link, SPIR 1.2 by " + *translatorCommand() + ", clBuildProgram";
    return byCommand;
  }
  return lto ? "SPIRV-Tools link, SPIR 1.2, LLVM -O2 across images, clBuildProgram"
             : "SPIRV-Tools link, SPIR 1.2, clBuildProgram";
}

bool DeviceInfo::translates() const {
  return caps.spirvIl ? !caps.linker && lto : caps.spir && canTranslateToSpir();
}

}  // namespace devdl::backend::opencl
