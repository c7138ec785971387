#include "backend/opencl/opencl_device.h"
#include "backend/spirv/copy_kernels.h"
#include "backend/spirv/link.h"
#include "backend/spirv/place_variables.h"
#include "backend/spirv/translation.h"
#include "backend/spirv/translator_limits.h"
#include "image/local_definitions.h"
#include "support/debug.h"
#include "support/environment.h"
#include "support/error.h"
#include "support/version.h"
#include "support/xxh3.h"

#include "devdl.h"

#include <CL/cl_ext.h>
#include <llvm/ADT/StringExtras.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <vector>

namespace devdl::backend::opencl {

namespace {

llvm::Error clFailure(const char *what, cl_int code) {
  return fail(ErrorCode::Unsupported, llvm::Twine(what) + " failed: " + errorName(code));
}

// A string an info query gives (clGetPlatformInfo, clGetDeviceInfo); "" where it fails.
template <typename Query, typename Object, typename Param>
std::string infoString(Query query, Object object, Param param) {
  size_t size = 0;
  if (query(object, param, 0, nullptr, &size) != CL_SUCCESS || size == 0) return {};
  std::string value(size, '\0');
  if (query(object, param, size, value.data(), nullptr) != CL_SUCCESS) return {};
  value.resize(value.find('\0') == std::string::npos ? size : value.find('\0'));
  return value;
}

std::string platformString(const Api &api, cl_platform_id platform, cl_platform_info param) {
  return infoString(api.clGetPlatformInfo, platform, param);
}

std::string deviceString(const Api &api, cl_device_id device, cl_device_info param) {
  return infoString(api.clGetDeviceInfo, device, param);
}

template <typename T>
T deviceValue(const Api &api, cl_device_id device, cl_device_info param) {
  T value{};
  if (api.clGetDeviceInfo(device, param, sizeof value, &value, nullptr) != CL_SUCCESS) return T{};
  return value;
}

bool hasWord(const std::string &list, std::string_view word) {
  for (size_t pos = list.find(word); pos != std::string::npos; pos = list.find(word, pos + 1)) {
    const bool startOk = pos == 0 || list[pos - 1] == ' ';
    const bool endOk = pos + word.size() == list.size() || list[pos + word.size()] == ' ';
    if (startOk && endOk) return true;
  }
  return false;
}

std::string buildLog(const Api &api, cl_program program, cl_device_id device) {
  size_t size = 0;
  if (api.clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size) != CL_SUCCESS)
    return {};
  std::string log(size, '\0');
  api.clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

/// The program's binary for `device` (CL_PROGRAM_BINARIES holds one per device of the program).
llvm::Expected<std::string> programBinary(const Api &api, cl_program program, cl_device_id device) {
  cl_uint count = 0;
  cl_int err = api.clGetProgramInfo(program, CL_PROGRAM_NUM_DEVICES, sizeof count, &count, nullptr);
  if (err != CL_SUCCESS) return clFailure("clGetProgramInfo (CL_PROGRAM_NUM_DEVICES)", err);
  std::vector<cl_device_id> devices(count);
  std::vector<size_t> sizes(count);
  if ((err = api.clGetProgramInfo(program, CL_PROGRAM_DEVICES, count * sizeof(cl_device_id), devices.data(), nullptr)) !=
          CL_SUCCESS ||
      (err = api.clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, count * sizeof(size_t), sizes.data(), nullptr)) !=
          CL_SUCCESS)
    return clFailure("clGetProgramInfo (CL_PROGRAM_BINARY_SIZES)", err);
  const auto index = static_cast<size_t>(std::find(devices.begin(), devices.end(), device) - devices.begin());
  if (index == count || sizes[index] == 0) return fail(ErrorCode::Unsupported, "the program has no binary for the device");
  std::vector<std::string> binaries(count);
  std::vector<unsigned char *> pointers(count, nullptr);
  binaries[index].resize(sizes[index]);
  pointers[index] = reinterpret_cast<unsigned char *>(binaries[index].data());
  if ((err = api.clGetProgramInfo(program, CL_PROGRAM_BINARIES, count * sizeof(unsigned char *), pointers.data(),
                                  nullptr)) != CL_SUCCESS)
    return clFailure("clGetProgramInfo (CL_PROGRAM_BINARIES)", err);
  return std::move(binaries[index]);
}

}  // namespace

namespace {

// The regions of programs the driver still held when devdl let them go: a command of one of their
// kernels not yet retired, a kernel the user made of them (each holds a reference on the program,
// and PoCL has no program release callback). Each is kept, with devdl's reference on its
// program, until the driver lets the program go too: its kernels run with the region's address
// built in. Never destroyed: kernels may still run at exit.
struct Kept {
  cl_program program;
  std::unique_ptr<HostVariables> variables;
};
std::mutex keptLock;
std::vector<Kept> &kept() {
  static auto *regions = new std::vector<Kept>;
  return *regions;
}

bool heldByOthers(const Api &api, cl_program program) {
  cl_uint references = 0;
  return api.clGetProgramInfo(program, CL_PROGRAM_REFERENCE_COUNT, sizeof references, &references, nullptr) !=
             CL_SUCCESS ||
         references > 1;
}

// Unmaps the kept regions whose programs only devdl holds now.
void sweepKept(const Api &api) {
  std::lock_guard hold(keptLock);
  llvm::erase_if(kept(), [&](Kept &region) {
    if (heldByOthers(api, region.program)) return false;
    api.clReleaseProgram(region.program);
    return true;
  });
}

}  // namespace

Program::~Program() {
  kernels_.forEach([&](cl_kernel kernel) { api_.clReleaseKernel(kernel); });
  if (variables_ && heldByOthers(api_, program_)) {
    std::lock_guard hold(keptLock);
    kept().push_back({program_, std::move(variables_)});
  } else {
    api_.clReleaseProgram(program_);
  }
  sweepKept(api_);
}

llvm::Expected<void *> Program::kernel(std::string_view name) {
  return kernels_.get(
      name,
      [&]() -> llvm::Expected<cl_kernel> {
        cl_int err = CL_SUCCESS;
        cl_kernel kernel = api_.clCreateKernel(program_, std::string(name).c_str(), &err);
        if (err != CL_SUCCESS)
          return fail(ErrorCode::NotFound, "kernel `" + llvm::Twine(name) + "`: " + errorName(err));
        return kernel;
      },
      [&](cl_kernel kernel) { api_.clReleaseKernel(kernel); });
}

llvm::Expected<std::pair<void *, size_t>> Program::driverAddress(std::string_view name) const {
  size_t size = 0;
  void *pointer = nullptr;
  if (cl_int err = pointers_.clGetDeviceGlobalVariablePointerINTEL(id_, program_, std::string(name).c_str(), &size,
                                                                    &pointer);
      err != CL_SUCCESS)
    return fail(ErrorCode::NotFound, "variable `" + llvm::Twine(name) + "`: clGetDeviceGlobalVariablePointerINTEL on "
                                         "OpenCL device " + device_ + " failed: " + errorName(err));
  return std::pair(pointer, size);
}

llvm::Expected<cl_command_queue> Program::copyQueue(cl_context &context) const {
  cl_int err = api_.clGetProgramInfo(program_, CL_PROGRAM_CONTEXT, sizeof context, &context, nullptr);
  cl_command_queue queue =
      err == CL_SUCCESS ? api_.clCreateCommandQueueWithProperties(context, id_, nullptr, &err) : nullptr;
  if (err != CL_SUCCESS)
    return clFailure("a command queue for a variable's copy: clCreateCommandQueueWithProperties", err);
  return queue;
}

llvm::Expected<void *> Program::variable(std::string_view name) {
  if (const VariableLayout::Variable *placed = variables_ ? variables_->find(name) : nullptr)
    return variables_->data(*placed);
  if (pointers_.clGetDeviceGlobalVariablePointerINTEL) {
    auto address = driverAddress(name);
    if (!address) return address.takeError();
    return address->first;
  }
  return fail(ErrorCode::Unsupported, "`" + llvm::Twine(name) + "` is a device variable: OpenCL device " + device_ +
                                          " gives no device addresses of program variables" +
                                          (variables_ ? " (devdl placed this program's other variables in host "
                                                        "memory; this one's initializer holds an address it cannot)"
                                                      : ""));
}

llvm::Error Program::copyVariable(std::string_view name, size_t offset, void *host, size_t size, bool toDevice) {
  if (const VariableLayout::Variable *placed = variables_ ? variables_->find(name) : nullptr) {
    if (llvm::Error err = checkInsideVariable(name, placed->size, offset, size)) return err;
    char *there = variables_->data(*placed) + offset;
    std::memcpy(toDevice ? there : host, toDevice ? host : there, size);
    return llvm::Error::success();
  }
  if (pointers_.clGetDeviceGlobalVariablePointerINTEL) {  // at the driver's address, copied as USM
    auto address = driverAddress(name);
    if (!address) return address.takeError();
    if (llvm::Error err = checkInsideVariable(name, address->second, offset, size)) return err;
    cl_context context = nullptr;
    auto queue = copyQueue(context);
    if (!queue) return queue.takeError();
    char *there = static_cast<char *>(address->first) + offset;
    const cl_int err = pointers_.clEnqueueMemcpyINTEL(*queue, CL_TRUE, toDevice ? there : host, toDevice ? host : there,
                                                       size, 0, nullptr, nullptr);
    api_.clReleaseCommandQueue(*queue);
    if (err != CL_SUCCESS)
      return fail(ErrorCode::Unsupported, "variable `" + llvm::Twine(name) + "` on OpenCL device " + device_ +
                                              ": clEnqueueMemcpyINTEL failed: " + errorName(err));
    return llvm::Error::success();
  }
  // Through the copy kernel devdl linked into the program (copyKernels): an object of its own
  // each time, since the arguments of a kernel object are shared by whoever sets them.
  cl_int err = CL_SUCCESS;
  cl_kernel kernel = api_.clCreateKernel(program_, copyKernelName(name).c_str(), &err);
  if (err != CL_SUCCESS)
    return fail(ErrorCode::Unsupported, "`" + llvm::Twine(name) + "` is a device variable: OpenCL device " + device_ +
                                            " gives no device addresses of program variables, and its program has no "
                                            "copy kernel of devdl's for it (" + errorName(err) + ")");
  cl_context context = nullptr;
  auto queue = copyQueue(context);
  if (!queue) {
    api_.clReleaseKernel(kernel);
    return queue.takeError();
  }
  std::string staging(8 + size, '\0');
  if (toDevice) std::memcpy(staging.data() + 8, host, size);
  cl_mem buffer = api_.clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, staging.size(),
                                      staging.data(), &err);
  const cl_ulong at = offset, count = size;
  const cl_int in = toDevice;
  const size_t one = 1;
  const char *step = "clCreateBuffer";
  if (err == CL_SUCCESS) {
    step = "clSetKernelArg";
    if ((err = api_.clSetKernelArg(kernel, 0, sizeof buffer, &buffer)) == CL_SUCCESS &&
        (err = api_.clSetKernelArg(kernel, 1, sizeof at, &at)) == CL_SUCCESS &&
        (err = api_.clSetKernelArg(kernel, 2, sizeof count, &count)) == CL_SUCCESS &&
        (err = api_.clSetKernelArg(kernel, 3, sizeof in, &in)) == CL_SUCCESS) {
      step = "clEnqueueNDRangeKernel";
      if ((err = api_.clEnqueueNDRangeKernel(*queue, kernel, 1, nullptr, &one, &one, 0, nullptr, nullptr)) ==
          CL_SUCCESS) {
        step = "clEnqueueReadBuffer";
        err = api_.clEnqueueReadBuffer(*queue, buffer, CL_TRUE, 0, toDevice ? 8 : staging.size(), staging.data(), 0,
                                       nullptr, nullptr);
      }
    }
  }
  api_.clReleaseCommandQueue(*queue);
  if (buffer) api_.clReleaseMemObject(buffer);
  api_.clReleaseKernel(kernel);
  if (err != CL_SUCCESS)
    return fail(ErrorCode::Unsupported, "variable `" + llvm::Twine(name) + "` on OpenCL device " + device_ + ": " + step +
                                            " failed: " + errorName(err));
  uint64_t bytes = 0;
  std::memcpy(&bytes, staging.data(), sizeof bytes);
  if (llvm::Error err = checkInsideVariable(name, bytes, offset, size)) return err;
  if (!toDevice) std::memcpy(host, staging.data() + 8, size);
  return llvm::Error::success();
}

llvm::Expected<void *> Program::function(std::string_view name) {
  return fail(ErrorCode::Unsupported, "`" + llvm::Twine(name) + "` is a device function: OpenCL device " + device_ +
                                          " gives no device function pointers");
}

Device::Device(const Api &api, cl_platform_id platform, cl_device_id device, cl_context context)
    : api_(api), platform_(platform), device_(device), context_(context) {
  name_ = deviceString(api, device, CL_DEVICE_NAME);
  if (platformString(api, platform, CL_PLATFORM_NAME) == "Portable Computing Language") binaryKernelNameBound_ = NAME_MAX;
  const std::string extensions = deviceString(api, device, CL_DEVICE_EXTENSIONS);
  caps_.spirvIl = deviceString(api, device, CL_DEVICE_IL_VERSION).find("SPIR-V") != std::string::npos;
  caps_.spir = hasWord(extensions, "cl_khr_spir");
  caps_.linker = deviceValue<cl_bool>(api, device, CL_DEVICE_LINKER_AVAILABLE);
  const auto type = deviceValue<cl_device_type>(api, device, CL_DEVICE_TYPE);
  caps_.hostMemory = (type & CL_DEVICE_TYPE_CPU) && deviceValue<cl_bool>(api, device, CL_DEVICE_HOST_UNIFIED_MEMORY);
  // Variables at the driver's addresses where the device has USM and its platform gives
  // clGetDeviceGlobalVariablePointerINTEL, whether or not the device names
  // cl_intel_global_variable_pointers: Intel's CPU runtime gives it without naming it, and
  // DPC++'s OpenCL adapter asks for the entry point alone.
  if (hasWord(extensions, "cl_intel_unified_shared_memory")) {
    auto entry = [&](const char *name) { return api.clGetExtensionFunctionAddressForPlatform(platform, name); };
    pointers_.clGetDeviceGlobalVariablePointerINTEL =
        reinterpret_cast<VariablePointers::GetPointer>(entry("clGetDeviceGlobalVariablePointerINTEL"));
    pointers_.clEnqueueMemcpyINTEL = reinterpret_cast<VariablePointers::Memcpy>(entry("clEnqueueMemcpyINTEL"));
    caps_.variablePointers = pointers_.clGetDeviceGlobalVariablePointerINTEL && pointers_.clEnqueueMemcpyINTEL;
    if (!caps_.variablePointers) pointers_ = {};  // both, or neither
  }
  // The aspects as SYCL's OpenCL backend derives them from the device's answers.
  aspects_[aspect::cpu] = type & CL_DEVICE_TYPE_CPU;
  aspects_[aspect::gpu] = type & CL_DEVICE_TYPE_GPU;
  aspects_[aspect::accelerator] = type & CL_DEVICE_TYPE_ACCELERATOR;
  aspects_[aspect::custom] = type & CL_DEVICE_TYPE_CUSTOM;
  aspects_[aspect::fp16] = hasWord(extensions, "cl_khr_fp16");
  aspects_[aspect::fp64] = deviceValue<cl_device_fp_config>(api, device, CL_DEVICE_DOUBLE_FP_CONFIG) != 0;
  aspects_[aspect::int64_base_atomics] = hasWord(extensions, "cl_khr_int64_base_atomics");
  aspects_[aspect::int64_extended_atomics] = hasWord(extensions, "cl_khr_int64_extended_atomics");
  aspects_[aspect::atomic64] = aspects_[aspect::int64_base_atomics] && aspects_[aspect::int64_extended_atomics];
  aspects_[aspect::image] = deviceValue<cl_bool>(api, device, CL_DEVICE_IMAGE_SUPPORT);
  aspects_[aspect::online_compiler] = deviceValue<cl_bool>(api, device, CL_DEVICE_COMPILER_AVAILABLE);
  aspects_[aspect::online_linker] = caps_.linker;
  aspects_[aspect::queue_profiling] = true;  // every OpenCL device profiles its queues
  const bool usm = hasWord(extensions, "cl_intel_unified_shared_memory");
  aspects_[aspect::usm_device_allocations] = usm;
  aspects_[aspect::usm_host_allocations] = usm;
  aspects_[aspect::usm_shared_allocations] = usm;
  if (const char *options = devdlVariable("DEVDL_BUILD_OPTIONS")) options_ = options;
  const char *lto = devdlVariable("DEVDL_LTO");
  lto_ = !(lto && std::string_view(lto) == "0") && canTranslateToSpir();  // LLVM does it, through the translator
  identity_ = "OpenCL\n" + platformString(api, platform, CL_PLATFORM_NAME) + "\n" +
              platformString(api, platform, CL_PLATFORM_VERSION) + "\n" + name_ + "\n" +
              deviceString(api, device, CL_DEVICE_VERSION) + "\n" + deviceString(api, device, CL_DRIVER_VERSION) +
              "\n" + std::string(linkMethod()) + "\noptions " + options_ + "\nvariables " +
              (placesVariables()         ? "in host memory"
               : caps_.variablePointers ? "at the driver's addresses"
                                        : "copied by devdl's kernels") + "\nstored program format " +
              std::to_string(kStoredProgramVersion) + "\n" + devdlBuild();
}

Device::~Device() { api_.clReleaseContext(context_); }

int Device::backend() const { return DEVDL_BACKEND_OPENCL; }

std::string_view Device::linkMethod() const {
  if (caps_.spirvIl) return caps_.linker ? "SPIR-V IL, clCompileProgram, clLinkProgram"
                                         : lto_ ? "SPIRV-Tools link, LLVM -O2 across images, SPIR-V IL, clBuildProgram"
                                                : "SPIRV-Tools link, SPIR-V IL, clBuildProgram";
  return lto_ ? "SPIRV-Tools link, SPIR 1.2, LLVM -O2 across images, clBuildProgram"
              : "SPIRV-Tools link, SPIR 1.2, clBuildProgram";
}

void Device::native(devdl_native &out) const {
  out.backend = DEVDL_BACKEND_OPENCL;
  out.platform = platform_;
  out.device = device_;
  out.context = context_;
}

bool Device::accepts(const DeviceImage &image, std::string *why) const {
  if (image.format == ImageFormat::SpirV && (caps_.spirvIl || (caps_.spir && canTranslateToSpir()))) return true;
  if (image.format == ImageFormat::OpenClBinary) {
    auto object = nativeObject(image.bytes);
    if (object) return true;
    const std::string refused = llvm::toString(object.takeError());
    if (why) *why = refused;
    return false;
  }
  if (why)
    *why = image.format == ImageFormat::SpirV
               ? "OpenCL device " + name_ + " takes neither SPIR-V nor SPIR" +
                     (caps_.spir ? " (it takes SPIR, but this build of devdl cannot translate to it)" : "")
               : "OpenCL device " + name_ + " does not link " + std::string(formatName(image.format)) + " images";
  return false;
}

llvm::Expected<std::unique_ptr<backend::Program>> Device::link(std::span<const LinkInput> given, std::string *binary) {
  // Each image whose definitions another image interposes is linked as a copy with them local;
  // the driver copies what it is given, so the copies live for this call.
  std::deque<DeviceImage> copies;
  std::deque<std::string> edits;
  std::vector<LinkInput> inputs(given.begin(), given.end());
  for (LinkInput &input : inputs) {
    if (input.hidden.empty()) continue;
    auto edited = withLocalDefinitions(input.image->bytes, input.image->format, input.hidden);
    if (!edited) return inImage(edited.takeError(), input.label);
    DeviceImage &copy = copies.emplace_back(*input.image);
    copy.bytes = asBytes(edits.emplace_back(std::move(*edited)));
    input.image = &copy;
  }
  // Devdl's copy kernels, where the program has some, and their labels: one module for each image.
  std::deque<std::shared_ptr<const std::vector<uint32_t>>> copyWords;
  std::deque<DeviceImage> copyImages;
  auto program = [&]() -> llvm::Expected<std::unique_ptr<Program>> {
    const LinkInput *native = nullptr, *spirv = nullptr;
    for (const LinkInput &input : inputs) {
      const bool isNative = input.image->format == ImageFormat::OpenClBinary;
      // A native binary is asked of the driver where linkObjects makes its program: once.
      if (std::string why; !isNative && !accepts(*input.image, &why))
        return fail(ErrorCode::Unsupported, input.label + ": " + why);
      (isNative ? native : spirv) = &input;
    }
    // Native binaries are compiled objects: only the device's linker joins them, to each other
    // and to SPIR-V compiled as IL (the software link and SPIR have no place for them).
    if (native && spirv && !caps_.spirvIl)
      return fail(ErrorCode::Unsupported, native->label + ": OpenCL device " + name_ +
                                              " takes no SPIR-V IL, so its native binaries link only with each other, "
                                              "not with " + spirv->label);
    // Where devdl does not move the program's variables to host memory and the driver gives no
    // addresses of them, the host reads and writes them through kernels of devdl's: a module of
    // them for each SPIR-V image exporting variables (those the link sees), linked with the
    // images, by devdl or by the driver.
    for (size_t i = 0, count = inputs.size(); i < count && copiesThroughKernels(); ++i) {
      const LinkInput input = inputs[i];  // a copy: inputs grows
      std::vector<std::string> variables;
      for (const Symbol &s : input.image->symbols)
        if (s.kind == SymbolKind::Variable && !llvm::is_contained(input.hidden, s.name)) variables.emplace_back(s.name);
      if (variables.empty() || input.image->format != ImageFormat::SpirV) continue;
      CallTimes times;
      auto kernels = copyKernelsFor(*input.image, variables);
      times.mark("made");
      if (!kernels) {
        const std::string why = llvm::toString(kernels.takeError());
        if (Debug::get().on(Debug::Statistics))
          Debug::get().print("no copy kernels for the variables of " + input.label + ": " + why);
        continue;
      }
      DeviceImage &image = copyImages.emplace_back();
      image.format = ImageFormat::SpirV;
      const std::vector<uint32_t> &copying = *copyWords.emplace_back(std::move(*kernels));
      image.bytes = Bytes(reinterpret_cast<const uint8_t *>(copying.data()), copying.size() * 4);
      inputs.push_back({&image, "devdl's copy kernels for " + input.label});
      times.print(inputs.back().label);
    }
    if (native || (caps_.spirvIl && caps_.linker)) return linkObjects(inputs);
    // The software link, then the linked module as IL where the device takes it, else as SPIR.
    std::vector<const DeviceImage *> images;
    std::vector<std::string> labels;
    for (const LinkInput &input : inputs) {
      images.push_back(input.image);
      labels.push_back(input.label);
      // What the translator would end the process on, refused naming the image it came from.
      if (caps_.spirvIl) continue;
      std::vector<uint32_t> words(input.image->bytes.size() / 4);
      std::memcpy(words.data(), input.image->bytes.data(), words.size() * 4);
      if (llvm::Error err = checkTranslatable(words)) return inImage(std::move(err), input.label);
    }
    auto linked = linkSpirv(images, labels, caps_.variablePointers);
    if (!linked) return linked.takeError();
    // The constants set, under the SpecIds they have in the linked module.
    SpecConstants specs;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].specConstants)
        for (const auto &[id, value] : *inputs[i].specConstants) specs[linkedSpecId(i, id)] = value;
    std::vector<SpecConstant> values;
    for (const auto &[id, bytes] : specs) {
      uint64_t value = 0;
      std::memcpy(&value, bytes.data(), std::min(bytes.size(), sizeof value));  // little-endian hosts
      values.emplace_back(id, value);
    }
    if (caps_.spirvIl) {
      // Optimized across the images where the translator can write back what LLVM made, with
      // the constants applied; else as linked, the driver setting the constants.
      if (lto_) {
        auto optimized = optimizeSpirv(*linked, values);
        if (optimized) return buildIl(*optimized, {});
        const std::string why = llvm::toString(optimized.takeError());
        if (Debug::get().on(Debug::Statistics))
          Debug::get().print("not optimized across images for " + name_ + ": " + why);
      }
      return buildIl(*linked, specs);
    }
    // Where the device's kernels are built apart, each with its own copy of the program's
    // variables, they move to host memory, at an address that follows from the program.
    std::unique_ptr<HostVariables> placed;
    auto place = [&](const VariableLayout &layout) -> llvm::Expected<uint64_t> {
      sweepKept(api_);
      std::string constants;
      for (const auto &[id, value] : values) {
        constants.append(reinterpret_cast<const char *>(&id), sizeof id);
        constants.append(reinterpret_cast<const char *>(&value), sizeof value);
      }
      const std::string_view words(reinterpret_cast<const char *>(linked->data()), linked->size() * 4);
      auto region = HostVariables::place(layout, xxh3::hash64({words, constants}));
      if (!region) return region.takeError();
      placed = std::move(*region);
      return placed->address();
    };
    auto spir = spirvToSpir(*linked, values, lto_, placesVariables() ? PlaceVariables(place) : PlaceVariables(nullptr));
    if (!spir) return spir.takeError();
    auto built = buildSpir(*spir);
    if (built) (*built)->holdVariables(std::move(placed));
    return built;
  }();
  if (!program) return program.takeError();
  if (binary) *binary = binaryOf(**program);
  return std::move(*program);
}

std::string Device::binaryOf(const Program &program) const {
  auto notStored = [&](const std::string &why) {
    if (Debug::get().on(Debug::Statistics)) Debug::get().print("program not stored on " + name_ + ": " + why);
    return std::string();
  };
  if (binaryKernelNameBound_ != SIZE_MAX) {
    size_t size = 0;
    std::string names;
    if (api_.clGetProgramInfo(program.get(), CL_PROGRAM_KERNEL_NAMES, 0, nullptr, &size) == CL_SUCCESS) {
      names.resize(size);
      api_.clGetProgramInfo(program.get(), CL_PROGRAM_KERNEL_NAMES, size, names.data(), nullptr);
    }
    for (llvm::StringRef name : llvm::split(llvm::StringRef(names.c_str()), ';'))
      if (name.size() > binaryKernelNameBound_)
        return notStored("the driver makes a program's binary in a directory named after each kernel, and kernel `" +
                         name.str() + "` is " + std::to_string(name.size()) + " bytes, longer than a file name may be");
  }
  auto bytes = programBinary(api_, program.get(), device_);
  if (!bytes) return notStored(llvm::toString(bytes.takeError()));
  return storedProgram(program.hostVariables(), *bytes);
}

llvm::Expected<std::unique_ptr<backend::Program>> Device::load(std::string_view binary) {
  auto stored = readStoredProgram(binary);
  if (!stored) return stored.takeError();
  // Its variables where its kernels were built to find them, mapped before the driver builds it.
  // Where a program still there holds that address (an instance of the same program the driver
  // has not let go, another context's), this process cannot take the entry now (ErrorCode::Busy).
  std::unique_ptr<HostVariables> variables;
  if (stored->variables) {
    sweepKept(api_);
    auto &[address, layout] = *stored->variables;
    auto region = HostVariables::at(std::move(layout), address);
    if (!region) return region.takeError();
    variables = std::move(*region);
  }
  auto program = buildBinary(stored->driverBinary, options_, "a cached program");
  if (program) (*program)->holdVariables(std::move(variables));
  return program;
}

std::unique_ptr<Program> Device::own(cl_program program) const {
  return std::make_unique<Program>(api_, program, name_, device_, pointers_);
}

llvm::Expected<std::unique_ptr<Program>> Device::fromBinary(Bytes binary) const {
  const auto *bytes = binary.data();
  const size_t size = binary.size();
  cl_int status = CL_SUCCESS, err = CL_SUCCESS;
  cl_program program = api_.clCreateProgramWithBinary(context_, 1, &device_, &size, &bytes, &status, &err);
  if (err == CL_SUCCESS && status != CL_SUCCESS) err = status;
  if (err != CL_SUCCESS) {
    if (program) api_.clReleaseProgram(program);
    return clFailure("clCreateProgramWithBinary", err);
  }
  return own(program);
}

llvm::Expected<std::unique_ptr<Program>> Device::nativeObject(Bytes binary) const {
  // Whether a binary is this device's is the driver's to say.
  std::string refused = !caps_.linker ? "it has no linker (CL_DEVICE_LINKER_AVAILABLE)" : "";
  if (refused.empty()) {
    auto object = fromBinary(binary);
    if (object) return object;
    refused = llvm::toString(object.takeError());
  }
  return fail(ErrorCode::Unsupported, "OpenCL device " + name_ + " does not take this native binary: " + refused);
}

llvm::Expected<std::unique_ptr<Program>> Device::buildBinary(std::string_view binary, const std::string &options,
                                                             std::string_view what) const {
  auto owned = fromBinary(asBytes(binary));
  if (!owned) return fail(ErrorCode::Unsupported, llvm::toString(owned.takeError()) + " (" + std::string(what) + ")");
  cl_program program = (*owned)->get();
  cl_int err = CL_SUCCESS;
  if ((err = api_.clBuildProgram(program, 1, &device_, options.c_str(), nullptr, nullptr)) != CL_SUCCESS) {
    const std::string log = buildLog(api_, program, device_);
    return fail(ErrorCode::Unsupported, "clBuildProgram on " + name_ + " failed: " + errorName(err) + " (" +
                                            std::string(what) + ")" + (log.empty() ? "" : "\n" + log));
  }
  return std::move(*owned);
}

llvm::Error Device::specialize(cl_program program, const SpecConstants &specs) const {
  if (specs.empty()) return llvm::Error::success();
  if (!api_.clSetProgramSpecializationConstant)
    return fail(ErrorCode::Unsupported, "the OpenCL ICD loader has no clSetProgramSpecializationConstant (OpenCL 2.2)");
  for (const auto &[id, value] : specs)
    if (cl_int err = api_.clSetProgramSpecializationConstant(program, id, value.size(), value.data()); err != CL_SUCCESS)
      return clFailure(("clSetProgramSpecializationConstant (SpecId " + std::to_string(id) + ")").c_str(), err);
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Program>> Device::buildIl(std::span<const uint32_t> words, const SpecConstants &specs) const {
  cl_int err = CL_SUCCESS;
  cl_program program = api_.clCreateProgramWithIL(context_, words.data(), words.size() * sizeof(uint32_t), &err);
  if (err != CL_SUCCESS) return clFailure("clCreateProgramWithIL", err);
  auto owned = own(program);
  if (llvm::Error e = specialize(program, specs)) return e;
  err = api_.clBuildProgram(program, 1, &device_, options_.c_str(), nullptr, nullptr);
  if (err != CL_SUCCESS) {
    std::string log = buildLog(api_, program, device_);
    return fail(ErrorCode::Unsupported, "clBuildProgram (SPIR-V) on " + name_ + " failed: " + errorName(err) +
                                            (log.empty() ? "" : "\n" + log));
  }
  return owned;
}

llvm::Expected<std::shared_ptr<const std::vector<uint32_t>>> Device::copyKernelsFor(
    const DeviceImage &image, std::span<const std::string> variables) const {
  const xxh3::Hash128 bytes = xxh3::hash128(image.bytes.data(), image.bytes.size());
  std::string names;
  for (const std::string &name : variables) names.append(name).push_back('\0');
  const std::array<uint64_t, 3> key{bytes.low, bytes.high, xxh3::hash64(names.data(), names.size())};
  {
    std::lock_guard lock(copyKernelsMutex_);
    if (auto it = copyKernels_.find(key); it != copyKernels_.end()) return it->second;
  }
  std::vector<uint32_t> words(image.bytes.size() / 4);
  std::memcpy(words.data(), image.bytes.data(), words.size() * 4);
  auto made = copyKernels(words, variables);
  if (!made) return made.takeError();
  auto kept = std::make_shared<const std::vector<uint32_t>>(std::move(*made));
  std::lock_guard lock(copyKernelsMutex_);
  if (copyKernels_.size() >= kCopyKernelsKept) copyKernels_.clear();
  return copyKernels_.try_emplace(key, std::move(kept)).first->second;
}

llvm::Expected<std::unique_ptr<Program>> Device::linkObjects(std::span<const LinkInput> inputs) const {
  // Each image is compiled on its own, imports left open (a native binary is compiled
  // already); the device's linker resolves them, as the plan bound them, since the plan holds
  // one definition of each import.
  std::vector<std::unique_ptr<Program>> objects;
  std::vector<cl_program> handles;
  CallTimes times;
  for (const LinkInput &input : inputs) {
    if (input.image->format == ImageFormat::OpenClBinary) {
      auto object = nativeObject(input.image->bytes);
      if (!object) return fail(ErrorCode::Unsupported, input.label + ": " + llvm::toString(object.takeError()));
      handles.push_back((*object)->get());
      objects.push_back(std::move(*object));
      times.mark("clCreateProgramWithBinary");
      continue;
    }
    cl_int err = CL_SUCCESS;
    cl_program program = api_.clCreateProgramWithIL(context_, input.image->bytes.data(), input.image->bytes.size(), &err);
    if (err != CL_SUCCESS) return inImage(clFailure("clCreateProgramWithIL", err), input.label);
    objects.push_back(own(program));
    if (input.specConstants)
      if (llvm::Error e = specialize(program, *input.specConstants)) return inImage(std::move(e), input.label);
    err = api_.clCompileProgram(program, 1, &device_, options_.c_str(), 0, nullptr, nullptr, nullptr, nullptr);
    if (err != CL_SUCCESS) {
      const std::string log = buildLog(api_, program, device_);
      return fail(ErrorCode::Unsupported, input.label + ": clCompileProgram on " + name_ + " failed: " +
                                              errorName(err) + (log.empty() ? "" : "\n" + log));
    }
    handles.push_back(program);
    times.mark("clCompileProgram");
  }
  cl_int err = CL_SUCCESS;
  cl_program linked = api_.clLinkProgram(context_, 1, &device_, "", static_cast<cl_uint>(handles.size()),
                                         handles.data(), nullptr, nullptr, &err);
  if (err != CL_SUCCESS || !linked) {
    // A program object may come back with the log even when linking failed.
    const std::string log = linked ? buildLog(api_, linked, device_) : std::string();
    if (linked) api_.clReleaseProgram(linked);
    std::string images;
    for (const LinkInput &input : inputs) images += (images.empty() ? "" : ", ") + input.label;
    return fail(ErrorCode::Unsupported, "clLinkProgram on " + name_ + " of " + images + " failed: " + errorName(err) +
                                            (log.empty() ? "" : "\n" + log));
  }
  times.mark("clLinkProgram");
  times.print("linked " + std::to_string(inputs.size()) + " images on " + name_);
  return own(linked);
}

llvm::Expected<std::unique_ptr<Device>> Device::openDefault() {
  auto loaded = opencl::api();
  if (!loaded) return loaded.takeError();
  const Api &cl = *loaded;
  cl_uint numPlatforms = 0;
  cl_int err = cl.clGetPlatformIDs(0, nullptr, &numPlatforms);
  if (err == CL_PLATFORM_NOT_FOUND_KHR || numPlatforms == 0)
    return fail(ErrorCode::NotFound, "no OpenCL platform (no ICD is installed)");
  if (err != CL_SUCCESS) return clFailure("clGetPlatformIDs", err);
  std::vector<cl_platform_id> platforms(numPlatforms);
  if ((err = cl.clGetPlatformIDs(numPlatforms, platforms.data(), nullptr)) != CL_SUCCESS)
    return clFailure("clGetPlatformIDs", err);

  // The candidates, in platform then device order: devices that can compile.
  std::vector<std::pair<cl_platform_id, cl_device_id>> candidates;
  for (cl_platform_id platform : platforms) {
    cl_uint numDevices = 0;
    if (cl.clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &numDevices) != CL_SUCCESS) continue;
    std::vector<cl_device_id> devices(numDevices);
    if (cl.clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, numDevices, devices.data(), nullptr) != CL_SUCCESS)
      continue;
    for (cl_device_id device : devices)
      if (deviceValue<cl_bool>(cl, device, CL_DEVICE_COMPILER_AVAILABLE)) candidates.emplace_back(platform, device);
  }
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
  cl_platform_id platform = nullptr;
  cl_int err = cl.clGetDeviceInfo(device, CL_DEVICE_PLATFORM, sizeof platform, &platform, nullptr);
  if (err != CL_SUCCESS) return clFailure("device_dlattach: clGetDeviceInfo", err);
  if ((err = cl.clRetainContext(context)) != CL_SUCCESS) return clFailure("device_dlattach: clRetainContext", err);
  return std::unique_ptr<Device>(new Device(cl, platform, device, context));
}

llvm::Expected<std::unique_ptr<Program>> Device::buildSpir(std::string_view bitcode, std::string_view options) const {
  if (!caps_.spir) return fail(ErrorCode::Unsupported, "device " + name_ + " does not take SPIR (no cl_khr_spir)");
  std::string buildOptions = "-x spir -spir-std=1.2";
  for (std::string_view more : {std::string_view(options_), options})
    if (!more.empty()) buildOptions += " " + std::string(more);
  return buildBinary(bitcode, buildOptions, "SPIR");
}

}  // namespace devdl::backend::opencl
