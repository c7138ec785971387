#include "backend/level_zero/ze_device.h"
#include "image/instance_cells.h"
#include "support/environment.h"
#include "support/error.h"
#include "support/version.h"

#include "devdl.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/StringExtras.h>

#include <algorithm>
#include <cstring>
#include <deque>

namespace devdl::backend::level_zero {

namespace {

llvm::Error zeFailure(std::string_view what, ze_result_t result) {
  return fail(ErrorCode::Unsupported, std::string(what) + " failed: " + errorName(result));
}

// The text of a build log, which it destroys; "" for none.
std::string takeLog(const Api &api, ze_module_build_log_handle_t log) {
  if (!log) return {};
  size_t size = 0;
  std::string text;
  if (api.zeModuleBuildLogGetString(log, &size, nullptr) == ZE_RESULT_SUCCESS && size > 0) {
    text.resize(size);
    if (api.zeModuleBuildLogGetString(log, &size, text.data()) != ZE_RESULT_SUCCESS) text.clear();
  }
  api.zeModuleBuildLogDestroy(log);
  text.resize(std::strlen(text.c_str()));
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

std::string deviceName(const Api &api, ze_device_handle_t device, ze_device_properties_t *out = nullptr) {
  ze_device_properties_t properties{};
  properties.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
  if (api.zeDeviceGetProperties(device, &properties) != ZE_RESULT_SUCCESS) return "(unnamed)";
  if (out) *out = properties;
  return std::string(properties.name, strnlen(properties.name, sizeof properties.name));
}

// The native binaries of a program's modules, as the disk cache keeps them: "DVZE", then per
// module its size (u64) and bytes, in link order.
constexpr char kBinaryMagic[4] = {'D', 'V', 'Z', 'E'};

}  // namespace

Program::~Program() {
  kernels_.releaseAll();  // before their modules
  for (ze_module_handle_t module : modules_) api_.zeModuleDestroy(module);
}

llvm::Expected<void *> Program::kernel(std::string_view name) {
  return kernels_.get(
      name,
      [&]() -> llvm::Expected<ze_kernel_handle_t> {
        const std::string text(name);
        ze_kernel_desc_t desc = {ZE_STRUCTURE_TYPE_KERNEL_DESC, nullptr, 0, text.c_str()};
        ze_kernel_handle_t kernel = nullptr;
        ze_result_t result = ZE_RESULT_ERROR_INVALID_KERNEL_NAME;
        for (ze_module_handle_t module : modules_) {
          result = api_.zeKernelCreate(module, &desc, &kernel);
          if (result != ZE_RESULT_ERROR_INVALID_KERNEL_NAME) break;  // found, or another failure
        }
        if (result != ZE_RESULT_SUCCESS) return fail(ErrorCode::NotFound, "kernel `" + text + "`: " + errorName(result));
        return kernel;
      });
}

llvm::Expected<Extent> Program::variable(std::string_view name) {
  const std::string text(name);
  ze_result_t result = ZE_RESULT_ERROR_INVALID_GLOBAL_NAME;
  for (ze_module_handle_t module : modules_) {
    void *pointer = nullptr;
    size_t size = 0;
    result = api_.zeModuleGetGlobalPointer(module, text.c_str(), &size, &pointer);
    if (result == ZE_RESULT_SUCCESS) return Extent{pointer, size};
    if (result != ZE_RESULT_ERROR_INVALID_GLOBAL_NAME) break;
  }
  return fail(ErrorCode::Unsupported, "`" + text + "` is a device variable: zeModuleGetGlobalPointer on " + device_ +
                                          " failed: " + errorName(result));
}

llvm::Error Program::copyVariable(std::string_view name, size_t offset, void *host, size_t size, bool toDevice) {
  const std::string text(name);
  ze_result_t result = ZE_RESULT_ERROR_INVALID_GLOBAL_NAME;
  void *pointer = nullptr;
  size_t bytes = 0;
  for (ze_module_handle_t module : modules_) {
    result = api_.zeModuleGetGlobalPointer(module, text.c_str(), &bytes, &pointer);
    if (result != ZE_RESULT_ERROR_INVALID_GLOBAL_NAME) break;
  }
  if (result != ZE_RESULT_SUCCESS)
    return fail(ErrorCode::Unsupported, "`" + text + "` is a device variable: zeModuleGetGlobalPointer on " + device_ +
                                            " failed: " + errorName(result));
  if (llvm::Error err = checkInsideVariable(name, bytes, offset, size)) return err;
  ze_command_queue_desc_t queue = {ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, nullptr, 0, 0, 0,
                                   ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS, ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
  ze_command_list_handle_t list = nullptr;
  result = api_.zeCommandListCreateImmediate(context_, deviceHandle_, &queue, &list);
  if (result != ZE_RESULT_SUCCESS)
    return fail(ErrorCode::Unsupported, "variable `" + text + "`: zeCommandListCreateImmediate on " + device_ +
                                            " failed: " + errorName(result));
  void *there = static_cast<char *>(pointer) + offset;
  result = api_.zeCommandListAppendMemoryCopy(list, toDevice ? there : host, toDevice ? host : there, size, nullptr, 0,
                                             nullptr);
  api_.zeCommandListDestroy(list);
  if (result != ZE_RESULT_SUCCESS)
    return fail(ErrorCode::Unsupported, "variable `" + text + "`: zeCommandListAppendMemoryCopy on " + device_ +
                                            " failed: " + errorName(result));
  return llvm::Error::success();
}

llvm::Expected<void *> Program::function(std::string_view name) {
  const std::string text(name);
  ze_result_t result = ZE_RESULT_ERROR_INVALID_FUNCTION_NAME;
  for (ze_module_handle_t module : modules_) {
    void *pointer = nullptr;
    result = api_.zeModuleGetFunctionPointer(module, text.c_str(), &pointer);
    if (result == ZE_RESULT_SUCCESS) return pointer;
    if (result != ZE_RESULT_ERROR_INVALID_FUNCTION_NAME) break;
  }
  return fail(ErrorCode::Unsupported, "`" + text + "` is a device function: zeModuleGetFunctionPointer on " + device_ +
                                          " failed: " + errorName(result));
}

Device::Device(const Api &api, ze_driver_handle_t driver, ze_device_handle_t device, ze_context_handle_t context,
               bool ownsContext)
    : api_(api), driver_(driver), device_(device), context_(context), ownsContext_(ownsContext) {
  ze_device_properties_t properties{};
  name_ = deviceName(api, device, &properties);
  ze_device_module_properties_t module{};
  module.stype = ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES;
  if (api.zeDeviceGetModuleProperties(device, &module) == ZE_RESULT_SUCCESS) spirvVersion_ = module.spirvVersionSupported;
  // The aspects as SYCL's Level Zero backend derives them from the device's properties.
  aspects_[aspect::gpu] = properties.type == ZE_DEVICE_TYPE_GPU;
  aspects_[aspect::cpu] = properties.type == ZE_DEVICE_TYPE_CPU;
  aspects_[aspect::accelerator] = properties.type == ZE_DEVICE_TYPE_FPGA || properties.type == ZE_DEVICE_TYPE_MCA;
  aspects_[aspect::fp16] = module.flags & ZE_DEVICE_MODULE_FLAG_FP16;
  aspects_[aspect::fp64] = module.flags & ZE_DEVICE_MODULE_FLAG_FP64;
  aspects_[aspect::int64_base_atomics] = module.flags & ZE_DEVICE_MODULE_FLAG_INT64_ATOMICS;
  aspects_[aspect::int64_extended_atomics] = aspects_[aspect::int64_base_atomics];
  aspects_[aspect::atomic64] = aspects_[aspect::int64_base_atomics];
  aspects_[aspect::online_compiler] = aspects_[aspect::online_linker] = true;  // zeModuleCreate, zeModuleDynamicLink
  aspects_[aspect::queue_profiling] = true;
  aspects_[aspect::usm_device_allocations] = aspects_[aspect::usm_host_allocations] = true;
  aspects_[aspect::usm_shared_allocations] = true;
  uint32_t count = 0;
  if (api.zeDriverGetExtensionProperties(driver, &count, nullptr) == ZE_RESULT_SUCCESS && count > 0) {
    std::vector<ze_driver_extension_properties_t> extensions(count);
    if (api.zeDriverGetExtensionProperties(driver, &count, extensions.data()) == ZE_RESULT_SUCCESS)
      for (uint32_t i = 0; i < count; ++i)
        moduleProgram_ |= std::strncmp(extensions[i].name, ZE_MODULE_PROGRAM_EXP_NAME, ZE_MAX_EXTENSION_NAME) == 0;
  }
  if (const char *options = devdlVariable("DEVDL_BUILD_OPTIONS")) options_ = options;
  ze_driver_properties_t driverProperties{};
  driverProperties.stype = ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES;
  api.zeDriverGetProperties(driver, &driverProperties);
  ze_api_version_t version{};
  api.zeDriverGetApiVersion(driver, &version);
  char ids[64];
  std::snprintf(ids, sizeof ids, "vendor 0x%04x device 0x%04x", properties.vendorId, properties.deviceId);
  identity_ = "Level Zero\n" + name_ + "\n" + ids + "\ndriver " + std::to_string(driverProperties.driverVersion) +
              ", API " + std::to_string(ZE_MAJOR_VERSION(version)) + "." + std::to_string(ZE_MINOR_VERSION(version)) +
              "\n" + std::string(linkMethod()) + "\noptions " + options_ + "\n" + devdlBuild();
}

Device::~Device() {
  if (ownsContext_) api_.zeContextDestroy(context_);
}

int Device::backend() const { return DEVDL_BACKEND_LEVEL_ZERO; }

std::string_view Device::linkMethod() const {
  return moduleProgram_ ? "one module of the plan's SPIR-V (ze_module_program_exp_desc_t)"
                        : "zeModuleCreate per image (-library-compilation), zeModuleDynamicLink";
}

void Device::native(devdl_native &out) const {
  out.backend = DEVDL_BACKEND_LEVEL_ZERO;
  out.platform = driver_;
  out.device = device_;
  out.context = context_;
}

llvm::Error Device::accepts(const DeviceImage &image) const {
  if (image.format == ImageFormat::IntelNative) {
    // Whether a native binary is this device's is the driver's to say.
    ze_module_desc_t desc = {ZE_STRUCTURE_TYPE_MODULE_DESC, nullptr, ZE_MODULE_FORMAT_NATIVE, image.bytes.size(),
                             image.bytes.data(), nullptr, nullptr};
    auto module = create(desc, "native binary");
    if (module) {
      api_.zeModuleDestroy(*module);
      return llvm::Error::success();
    }
    const std::string refused = llvm::toString(module.takeError());
    return fail(ErrorCode::Unsupported, "Level Zero device " + name_ + " does not take this native binary: " +
                                            refused.substr(refused.find("zeModuleCreate")));
  }
  if (image.format != ImageFormat::SpirV)
    return fail(ErrorCode::Unsupported,
                "Level Zero device " + name_ + " does not link " + std::string(formatName(image.format)) + " images");
  uint32_t word = 0;  // the version, from the head: an image from its file's summary has no other bytes yet
  if (const Bytes head = image.head(); head.size() >= 8) std::memcpy(&word, head.data() + 4, 4);
  const uint32_t major = (word >> 16) & 0xff, minor = (word >> 8) & 0xff;
  if (spirvVersion_ && ZE_MAKE_VERSION(major, minor) > spirvVersion_)
    return fail(ErrorCode::Unsupported,
                "SPIR-V " + std::to_string(major) + "." + std::to_string(minor) + " is newer than Level Zero device " +
                    name_ + " reads (" + std::to_string(ZE_MAJOR_VERSION(spirvVersion_)) + "." +
                    std::to_string(ZE_MINOR_VERSION(spirvVersion_)) + ")");
  return llvm::Error::success();
}

llvm::Expected<ze_module_handle_t> Device::create(const ze_module_desc_t &desc, std::string_view what) const {
  ze_module_handle_t module = nullptr;
  ze_module_build_log_handle_t log = nullptr;
  const ze_result_t result = api_.zeModuleCreate(context_, device_, &desc, &module, &log);
  const std::string text = takeLog(api_, log);
  if (result != ZE_RESULT_SUCCESS)
    return fail(ErrorCode::Unsupported, std::string(what) + ": zeModuleCreate on " + name_ + " failed: " +
                                            errorName(result) + (text.empty() ? "" : "\n" + text));
  return module;
}

llvm::Error Device::dynamicLink(Program &program, std::string_view what) const {
  std::vector<ze_module_handle_t> modules = program.modules();
  ze_module_build_log_handle_t log = nullptr;
  const ze_result_t result = api_.zeModuleDynamicLink(static_cast<uint32_t>(modules.size()), modules.data(), &log);
  const std::string text = takeLog(api_, log);
  if (result != ZE_RESULT_SUCCESS)
    return fail(ErrorCode::Unsupported, "zeModuleDynamicLink on " + name_ + " of " + std::string(what) + " failed: " +
                                            errorName(result) + (text.empty() ? "" : "\n" + text));
  return llvm::Error::success();
}

std::string Device::unexported(std::span<const LinkInput> inputs, const Program &program) const {
  if (!api_.zeModuleInspectLinkageExt || program.modules().size() != inputs.size()) return {};
  std::string why;
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (const Symbol &import : inputs[i].image->symbols) {
      if (import.kind != SymbolKind::Import) continue;
      // The image of the plan that defines it, and what its module exports.
      for (size_t j = 0; j < inputs.size(); ++j) {
        if (j == i) continue;
        const auto &symbols = inputs[j].image->symbols;
        const bool defines = std::any_of(symbols.begin(), symbols.end(), [&](const Symbol &s) {
          return s.kind != SymbolKind::Import && s.name == import.name;
        });
        if (!defines) continue;
        ze_linkage_inspection_ext_desc_t desc = {ZE_STRUCTURE_TYPE_LINKAGE_INSPECTION_EXT_DESC, nullptr,
                                                 ZE_LINKAGE_INSPECTION_EXT_FLAG_EXPORTS};
        ze_module_handle_t module = program.modules()[j];
        ze_module_build_log_handle_t log = nullptr;
        if (api_.zeModuleInspectLinkageExt(&desc, 1, &module, &log) != ZE_RESULT_SUCCESS) {
          takeLog(api_, log);
          return why;
        }
        const std::string exports = takeLog(api_, log);
        const bool listed = exports.find(std::string(import.name)) != std::string::npos;
        if (!listed)
          why += "\n`" + std::string(import.name) + "` imported by " + inputs[i].label + " is not exported by " +
                 inputs[j].label + " as the driver built it" +
                 (inputs[j].image->format == ImageFormat::IntelNative
                      ? " (a native binary exports only what ocloc built with -library-compilation)"
                      : "");
        break;
      }
    }
  }
  return why;
}

namespace {

// Each input's specialization constants, as the driver takes them (pointers into `ids` and `values`).
struct ModuleConstants {
  std::vector<std::vector<uint32_t>> ids;
  std::vector<std::vector<const void *>> values;
  std::vector<ze_module_constants_t> constants;

  explicit ModuleConstants(std::span<const LinkInput> inputs)
      : ids(inputs.size()), values(inputs.size()), constants(inputs.size()) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].specConstants)
        for (const auto &[id, value] : *inputs[i].specConstants) {
          ids[i].push_back(id);
          values[i].push_back(value.data());
        }
      constants[i] = {static_cast<uint32_t>(ids[i].size()), ids[i].data(), values[i].data()};
    }
  }
};

}  // namespace

llvm::Expected<std::unique_ptr<backend::Program>> Device::link(std::span<const LinkInput> given, std::string *binary) {
  // The images, each as the driver gets it (a native binary is asked of the driver where its
  // module is made: once).
  DriverInputs prepared;
  if (llvm::Error err = prepared.prepare(*this, given, ImageFormat::IntelNative)) return err;
  const std::vector<LinkInput> &inputs = prepared.inputs;
  // A native binary is a module of its own: the module program takes SPIR-V alone.
  bool native = false;
  for (const LinkInput &input : inputs) {
    if (input.image->format != ImageFormat::IntelNative) continue;
    native = true;
    if (input.specConstants && !input.specConstants->empty())
      return fail(ErrorCode::Unsupported, input.label + ": the specialization constants of a native binary were fixed "
                                                        "when it was built");
  }
  auto program = moduleProgram_ && !native ? linkAsModuleProgram(inputs) : linkModuleByModule(inputs);
  if (!program) return program.takeError();
  if (binary)
    if (llvm::Error err = nativeBinaryOf(**program, *binary)) return err;
  return program;
}

std::string Device::buildFlags() const {
  // Built as libraries: exports of functions and variables reach the other images.
  return "-library-compilation -ze-take-global-address" + (options_.empty() ? "" : " " + options_);
}

llvm::Expected<std::unique_ptr<Program>> Device::linkAsModuleProgram(std::span<const LinkInput> inputs) const {
  const std::string flags = buildFlags();
  ModuleConstants constants(inputs);
  std::vector<size_t> sizes;
  std::vector<const uint8_t *> modules;
  std::vector<const char *> flagList(inputs.size(), flags.c_str());
  std::vector<const ze_module_constants_t *> constantList;
  std::string labels;
  for (size_t i = 0; i < inputs.size(); ++i) {
    sizes.push_back(inputs[i].image->bytes.size());
    modules.push_back(inputs[i].image->bytes.data());
    constantList.push_back(&constants.constants[i]);
    labels += (labels.empty() ? "" : ", ") + inputs[i].label;
  }
  ze_module_program_exp_desc_t many = {ZE_STRUCTURE_TYPE_MODULE_PROGRAM_EXP_DESC, nullptr,
                                       static_cast<uint32_t>(inputs.size()), sizes.data(), modules.data(),
                                       flagList.data(), constantList.data()};
  ze_module_desc_t desc = {ZE_STRUCTURE_TYPE_MODULE_DESC, &many, ZE_MODULE_FORMAT_IL_SPIRV, 0, nullptr, nullptr, nullptr};
  auto module = create(desc, labels);
  if (!module) return module.takeError();
  auto program = std::make_unique<Program>(api_, name_, context_, device_);
  program->add(*module);
  return program;
}

llvm::Expected<std::unique_ptr<Program>> Device::linkModuleByModule(std::span<const LinkInput> inputs) const {
  const std::string flags = buildFlags();
  ModuleConstants constants(inputs);
  auto program = std::make_unique<Program>(api_, name_, context_, device_);
  std::string labels;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Bytes bytes = inputs[i].image->bytes;
    const bool isNative = inputs[i].image->format == ImageFormat::IntelNative;
    ze_module_desc_t desc = {ZE_STRUCTURE_TYPE_MODULE_DESC, nullptr,
                             isNative ? ZE_MODULE_FORMAT_NATIVE : ZE_MODULE_FORMAT_IL_SPIRV, bytes.size(), bytes.data(),
                             isNative ? nullptr : flags.c_str(), isNative ? nullptr : &constants.constants[i]};
    auto module = create(desc, inputs[i].label);
    if (!module) return module.takeError();
    program->add(*module);
    labels += (labels.empty() ? "" : ", ") + inputs[i].label;
  }
  if (llvm::Error err = dynamicLink(*program, labels)) {
    const std::string why = unexported(inputs, *program);
    if (why.empty()) return err;
    return fail(ErrorCode::Unsupported, llvm::toString(std::move(err)) + why);
  }
  return program;
}

llvm::Error Device::nativeBinaryOf(const Program &program, std::string &binary) const {
  binary.assign(kBinaryMagic, sizeof kBinaryMagic);
  for (ze_module_handle_t module : program.modules()) {
    size_t size = 0;
    ze_result_t result = api_.zeModuleGetNativeBinary(module, &size, nullptr);
    std::string native(size, '\0');
    if (result == ZE_RESULT_SUCCESS)
      result = api_.zeModuleGetNativeBinary(module, &size, reinterpret_cast<uint8_t *>(native.data()));
    if (result != ZE_RESULT_SUCCESS) return zeFailure("zeModuleGetNativeBinary", result);
    const uint64_t length = size;
    binary.append(reinterpret_cast<const char *>(&length), sizeof length);
    binary.append(native.data(), size);
  }
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<backend::Program>> Device::load(std::string_view binary) {
  if (binary.size() < sizeof kBinaryMagic || std::memcmp(binary.data(), kBinaryMagic, sizeof kBinaryMagic) != 0)
    return fail(ErrorCode::Unsupported, "a cached program for Level Zero device " + name_ + " is not devdl's");
  auto program = std::make_unique<Program>(api_, name_, context_, device_);
  for (size_t at = sizeof kBinaryMagic; at < binary.size();) {
    uint64_t size = 0;
    if (binary.size() - at < sizeof size) return fail(ErrorCode::Unsupported, "a cached program is cut short");
    std::memcpy(&size, binary.data() + at, sizeof size);
    at += sizeof size;
    if (size > binary.size() - at) return fail(ErrorCode::Unsupported, "a cached program is cut short");
    ze_module_desc_t desc = {ZE_STRUCTURE_TYPE_MODULE_DESC, nullptr, ZE_MODULE_FORMAT_NATIVE, size,
                             reinterpret_cast<const uint8_t *>(binary.data() + at), nullptr, nullptr};
    auto module = create(desc, "a cached program");
    if (!module) return module.takeError();
    program->add(*module);
    at += size;
  }
  if (program->modules().size() > 1)
    if (llvm::Error err = dynamicLink(*program, "a cached program's modules")) return err;
  return program;
}

namespace {

// Every device each driver lists, in driver then device order.
llvm::Expected<std::vector<std::pair<ze_driver_handle_t, ze_device_handle_t>>> listedDevices(const Api &ze) {
  if (ze_result_t result = ze.zeInit(0); result != ZE_RESULT_SUCCESS)
    return fail(ErrorCode::NotFound, "no Level Zero driver (zeInit: " + errorName(result) + ")");
  uint32_t drivers = 0;
  if (ze.zeDriverGet(&drivers, nullptr) != ZE_RESULT_SUCCESS || drivers == 0)
    return fail(ErrorCode::NotFound, "no Level Zero driver");
  std::vector<ze_driver_handle_t> driverHandles(drivers);
  if (ze_result_t result = ze.zeDriverGet(&drivers, driverHandles.data()); result != ZE_RESULT_SUCCESS)
    return zeFailure("zeDriverGet", result);
  std::vector<std::pair<ze_driver_handle_t, ze_device_handle_t>> listed;
  for (ze_driver_handle_t driver : driverHandles) {
    uint32_t count = 0;
    if (ze.zeDeviceGet(driver, &count, nullptr) != ZE_RESULT_SUCCESS || count == 0) continue;
    std::vector<ze_device_handle_t> devices(count);
    if (ze.zeDeviceGet(driver, &count, devices.data()) != ZE_RESULT_SUCCESS) continue;
    for (uint32_t i = 0; i < count; ++i) listed.emplace_back(driver, devices[i]);
  }
  return listed;
}

}  // namespace

llvm::Expected<std::unique_ptr<Device>> Device::openDefault() {
  auto loaded = level_zero::api();
  if (!loaded) return loaded.takeError();
  const Api &ze = *loaded;
  // The candidates, in driver then device order.
  auto listed = listedDevices(ze);
  if (!listed) return listed.takeError();
  const std::vector<std::pair<ze_driver_handle_t, ze_device_handle_t>> &candidates = *listed;
  if (candidates.empty()) return fail(ErrorCode::NotFound, "no Level Zero device");
  std::vector<std::string> names;
  for (const auto &[driver, device] : candidates) names.push_back(deviceName(ze, device));
  auto chosen = chooseDevice(names, "Level Zero");
  if (!chosen) return chosen.takeError();
  auto [driver, device] = candidates[*chosen];
  ze_context_desc_t desc = {ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
  ze_context_handle_t context = nullptr;
  if (ze_result_t result = ze.zeContextCreate(driver, &desc, &context); result != ZE_RESULT_SUCCESS)
    return zeFailure("zeContextCreate", result);
  return std::unique_ptr<Device>(new Device(ze, driver, device, context, /*ownsContext=*/true));
}

llvm::Expected<std::unique_ptr<Device>> Device::attach(ze_driver_handle_t driver, ze_device_handle_t device,
                                                       ze_context_handle_t context) {
  auto loaded = level_zero::api();
  if (!loaded) return loaded.takeError();
  const Api &ze = *loaded;
  if (!driver || !device) return fail(ErrorCode::InvalidArgument, "Level Zero needs a driver and a device");
  // Only a device its driver lists: the loader calls through whatever the handles point at.
  auto listed = listedDevices(ze);
  if (!listed) return listed.takeError();
  if (!llvm::is_contained(*listed, std::make_pair(driver, device)))
    return fail(ErrorCode::InvalidArgument, "ze_device_handle_t " +
                                                llvm::Twine(llvm::utohexstr(reinterpret_cast<uintptr_t>(device))) +
                                                " is no device its ze_driver_handle_t lists");
  bool owns = false;
  if (!context) {
    ze_context_desc_t desc = {ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
    if (ze_result_t result = ze.zeContextCreate(driver, &desc, &context); result != ZE_RESULT_SUCCESS)
      return zeFailure("zeContextCreate", result);
    owns = true;
  }
  return std::unique_ptr<Device>(new Device(ze, driver, device, context, owns));
}

}  // namespace devdl::backend::level_zero
