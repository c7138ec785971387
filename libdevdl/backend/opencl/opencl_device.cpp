// An OpenCL device: opened (the default, or the program's own), which images it accepts, and its
// links begun (the inputs prepared). The rest of the backend: device_info.cpp (what it can take,
// read from its info queries, and the identity its programs are cached under), linker.cpp
// and opencl_parts.cpp (link strategies), program_builder.cpp (programs built and stored),
// opencl_program.cpp (kernels and variables), kept_regions.cpp, host_variables.cpp.
#include "backend/opencl/opencl_device.h"
#include "backend/opencl/opencl_info.h"
#include "backend/spirv/translation.h"
#include "backend/spirv/translator_process.h"
#include "backend/spirv/words.h"
#include "support/error.h"

#include "devdl.h"

#include <CL/cl_ext.h>
#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/StringExtras.h>

#include <string>
#include <vector>

namespace devdl::backend::opencl {

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

llvm::Expected<std::unique_ptr<backend::Program>> Device::link(std::span<const LinkInput> given, std::string *binary) {
  // The inputs as the driver takes them (the driver copies what it is given: the edited copies
  // live for this call); a native binary is asked of the driver where linkObjects makes its
  // program: once.
  DriverInputs prepared;
  if (llvm::Error err = prepared.prepare(*this, given, ImageFormat::OpenClBinary)) return err;
  return linker_.link(prepared.inputs, binary);
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
