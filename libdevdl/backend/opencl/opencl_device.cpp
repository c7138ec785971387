// An OpenCL device: opened (the default, or the program's own), what it can take read from its
// info queries (DeviceInfo), the identity its programs are cached under, and which images it
// accepts. The rest of the backend: opencl_link.cpp (link strategies), opencl_build.cpp (programs
// built and stored), opencl_program.cpp (kernels and variables), kept_regions.cpp,
// host_variables.cpp.
#include "backend/opencl/opencl_device.h"
#include "backend/opencl/opencl_info.h"
#include "backend/spirv/translation.h"
#include "backend/spirv/translator_command.h"
#include "backend/spirv/translator_process.h"
#include "backend/spirv/words.h"
#include "support/environment.h"
#include "support/error.h"
#include "support/version.h"

#include "devdl.h"

#include <CL/cl_ext.h>
#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/StringExtras.h>


#include <climits>
#include <string>
#include <vector>

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

Device::Device(const Api &api, cl_platform_id platform, cl_device_id device, cl_context context)
    : info_(api, platform, device, context), builder_(info_), linker_(info_, builder_) {
  aspects_ = info_.aspects;
}

Device::~Device() { info_.api.clReleaseContext(info_.context); }

int Device::backend() const { return DEVDL_BACKEND_OPENCL; }

void Device::native(devdl_native &out) const {
  out.backend = DEVDL_BACKEND_OPENCL;
  out.platform = info_.platform;
  out.device = info_.id;
  out.context = info_.context;
}

llvm::Error Device::accepts(const DeviceImage &image) const {
  const Capabilities &caps = info_.caps;
  const std::string &name = info_.name;
  // A module devdl's validator could not vouch for goes only to a driver that compiles and links
  // SPIR-V itself; elsewhere devdl links and translates it, which it does not do unvouched.
  if (image.format == ImageFormat::SpirV && !image.unvalidated.empty() && !(caps.spirvIl && caps.linker))
    return fail(ErrorCode::Unsupported, "devdl's SPIR-V validator could not vouch for it (" +
                                            std::string(image.unvalidated) + "), and OpenCL device " + name +
                                            " takes SPIR-V only through devdl's own link and translation, "
                                            "which it runs on modules it vouches for");
  // The reader left a SPIR-V image's bytes as aligned words in this host's byte order.
  if (image.format == ImageFormat::SpirV && caps.spirvIl && info_.spirvExtensions)
    for (std::string_view extension : declaredExtensions(std::span<const uint32_t>(
             reinterpret_cast<const uint32_t *>(image.bytes.data()), image.bytes.size() / 4)))
      if (!llvm::is_contained(*info_.spirvExtensions, extension))
        return fail(ErrorCode::Unsupported, "SPIR-V extension `" + std::string(extension) + "`, which OpenCL device " +
                                                name + " does not take (neither its driver's answer nor what devdl "
                                                "knows of its driver names it)");
  if (image.format == ImageFormat::SpirV && (caps.spirvIl || (caps.spir && canTranslateToSpir())))
    return llvm::Error::success();
  if (image.format == ImageFormat::OpenClBinary) {
    auto object = builder_.nativeObject(image.bytes);
    if (object) return llvm::Error::success();
    return fail(ErrorCode::Unsupported, llvm::toString(object.takeError()));
  }
  return fail(ErrorCode::Unsupported,
              image.format == ImageFormat::SpirV
                  ? "OpenCL device " + name + " takes neither SPIR-V nor SPIR" +
                        (caps.spir ? " (it takes SPIR, but this build of devdl cannot translate to it: it has no "
                                     "SPIRV-LLVM-Translator, as the portable library and the wheel have none, and "
                                     "found no llvm-spirv-15 on PATH; Debian: apt-get install llvm-spirv-15)" : "")
                  : "OpenCL device " + name + " does not link " + std::string(formatName(image.format)) + " images");
}

namespace {

// Every device each platform lists, in platform then device order.
llvm::Expected<std::vector<std::pair<cl_platform_id, cl_device_id>>> listedDevices(const Api &cl) {
  cl_uint numPlatforms = 0;
  cl_int err = cl.clGetPlatformIDs(0, nullptr, &numPlatforms);
  if (err == CL_PLATFORM_NOT_FOUND_KHR || numPlatforms == 0)
    return fail(ErrorCode::NotFound, "no OpenCL platform (no ICD is installed)");
  if (err != CL_SUCCESS) return clFailure("clGetPlatformIDs", err);
  std::vector<cl_platform_id> platforms(numPlatforms);
  if ((err = cl.clGetPlatformIDs(numPlatforms, platforms.data(), nullptr)) != CL_SUCCESS)
    return clFailure("clGetPlatformIDs", err);
  std::vector<std::pair<cl_platform_id, cl_device_id>> listed;
  for (cl_platform_id platform : platforms) {
    cl_uint numDevices = 0;
    if (cl.clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &numDevices) != CL_SUCCESS) continue;
    std::vector<cl_device_id> devices(numDevices);
    if (cl.clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, numDevices, devices.data(), nullptr) != CL_SUCCESS)
      continue;
    for (cl_device_id device : devices) listed.emplace_back(platform, device);
  }
  return listed;
}

}  // namespace

llvm::Expected<std::unique_ptr<Device>> Device::openDefault() {
  auto loaded = opencl::api();
  if (!loaded) return loaded.takeError();
  const Api &cl = *loaded;
  // The translator's helper takes some 15 ms to load LLVM, PoCL's platform some 25 to start: the
  // helper starts now, for the first link, and goes where the device chosen does not translate.
  if (hasTranslatorHelper()) startTranslatorAhead();
  auto device = openChosen(cl);
  if (!device || !(*device)->info_.translates()) stopTranslatorsAhead();
  return device;
}

llvm::Expected<std::unique_ptr<Device>> Device::openChosen(const Api &cl) {
  auto listed = listedDevices(cl);
  if (!listed) return listed.takeError();
  cl_int err = CL_SUCCESS;

  // The candidates, in platform then device order: devices that can compile.
  std::vector<std::pair<cl_platform_id, cl_device_id>> candidates;
  for (const auto &[platform, device] : *listed)
    if (deviceValue<cl_bool>(cl, device, CL_DEVICE_COMPILER_AVAILABLE)) candidates.emplace_back(platform, device);
  if (candidates.empty()) return fail(ErrorCode::NotFound, "no OpenCL device with a compiler");

  std::vector<std::string> names;
  for (const auto &[platform, device] : candidates) names.push_back(deviceString(cl, device, CL_DEVICE_NAME));
  auto chosen = chooseDevice(names, "OpenCL");
  if (!chosen) return chosen.takeError();
  auto [platform, device] = candidates[*chosen];
  const cl_context_properties properties[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(platform), 0};
  cl_context context = cl.clCreateContext(properties, 1, &device, nullptr, nullptr, &err);
  if (err != CL_SUCCESS) return clFailure("clCreateContext", err);
  return std::unique_ptr<Device>(new Device(cl, platform, device, context));
}

llvm::Expected<std::unique_ptr<Device>> Device::attach(cl_device_id device, cl_context context) {
  auto loaded = opencl::api();
  if (!loaded) return loaded.takeError();
  const Api &cl = *loaded;
  if (!device) return fail(ErrorCode::InvalidArgument, "no OpenCL device given (its cl_device_id is NULL)");
  // Only a device a platform lists: the ICD loader calls through whatever the pointer points at.
  auto listed = listedDevices(cl);
  if (!listed) return listed.takeError();
  auto found = llvm::find_if(*listed, [&](const auto &each) { return each.second == device; });
  if (found == listed->end())
    return fail(ErrorCode::InvalidArgument, "cl_device_id " + llvm::Twine(llvm::utohexstr(reinterpret_cast<uintptr_t>(device))) +
                                                " is no device an OpenCL platform lists (sub-devices are not taken)");
  const cl_platform_id platform = found->first;
  cl_int err = CL_SUCCESS;
  if (!context) {  // devdl's own on that device
    const cl_context_properties properties[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(platform), 0};
    context = cl.clCreateContext(properties, 1, &device, nullptr, nullptr, &err);
    if (err != CL_SUCCESS) return clFailure("clCreateContext", err);
  } else if ((err = cl.clRetainContext(context)) != CL_SUCCESS) {
    return clFailure("clRetainContext", err);
  }
  auto attached = std::unique_ptr<Device>(new Device(cl, platform, device, context));
  if (attached->info_.translates()) startTranslatorAhead();
  return attached;
}

}  // namespace devdl::backend::opencl
