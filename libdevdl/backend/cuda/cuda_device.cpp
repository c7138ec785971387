// A CUDA device opened through the driver API: what it is (name, compute capability, aspects), the
// linkers it may use, found as it opens (cuda_link.cpp links with them), the images it takes
// (architecture.h), and programs loaded from their binaries.
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/function_table.h"
#include "backend/cuda/toolkit.h"
#include "image/instance_cells.h"
#include "image/readers.h"
#include "support/debug.h"
#include "support/environment.h"
#include "support/error.h"
#include "support/version.h"

#include "devdl.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringSet.h>
#include <llvm/ADT/StringRef.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <optional>
#include <vector>

namespace devdl::backend::cuda {

Device::Device(const Api &api, CUdevice device, CUcontext context, bool primary)
    : api_(api), device_(device), context_(context), primary_(primary) {
  char name[256] = {};
  if (api.cuDeviceGetName(name, sizeof name - 1, device) == CUDA_SUCCESS) name_ = name;
  int major = 0, minor = 0;
  api.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  api.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  sm_ = major * 10 + minor;
  // The aspects as SYCL's CUDA backend reports them: a GPU with fp64, 64-bit atomics, a linker,
  // profiling and unified memory; fp16 from sm_53.
  for (uint32_t a : {aspect::gpu, aspect::fp64, aspect::int64_base_atomics, aspect::int64_extended_atomics,
                     aspect::atomic64, aspect::image, aspect::online_linker, aspect::queue_profiling,
                     aspect::usm_device_allocations, aspect::usm_host_allocations, aspect::usm_shared_allocations})
    aspects_[a] = true;
  aspects_[aspect::fp16] = sm_ >= 53;
  int driver = 0;
  api.cuDriverGetVersion(&driver);
  const std::string_view linker = devdlVariable("DEVDL_CUDA_LINKER") ? devdlVariable("DEVDL_CUDA_LINKER") : "";
  const char *lto = devdlVariable("DEVDL_LTO");
  linkers_.lto = !(lto && std::string_view(lto) == "0");
  linkers_.jitAlways = linker == "nvjitlink";
  // Unasked, nvJitLink is for LTO and for much PTX (kPtxForThreads): for compiled code it links as
  // cuLink does, after 5-10 ms of loading a 100 MB library (on the H100 the seed's cubins were
  // linked in 8.3 ms, 4.1 by cuLink).
  if (linker != "culink") linkers_.jitLink = findNvJitLink();
  if (linkers_.jitAlways && !linkers_.jitLink)
    linkers_.error = "DEVDL_CUDA_LINKER=nvjitlink, but there is no libnvJitLink.so.13 or .so.12 (DEVDL_NVJITLINK, "
                   "LD_LIBRARY_PATH, $CUDA_HOME/lib64, /usr/local/cuda/lib64, the system's library directories)";
  const std::string culink = "cuLinkCreate, cuLinkAddData, cuLinkComplete";
  const std::optional<NvJitLinkFile> &jitLink = linkers_.jitLink;
  linkers_.method = !jitLink ? culink
                    : linkers_.jitAlways
                        ? "nvJitLink (" + jitLink->path + ")" + (linkers_.lto ? ", -lto over LTO-IR" : "")
                        : culink + "; nvJitLink where there is LTO-IR" + (linkers_.lto ? "" : " (linked from its PTX)") +
                              " or much PTX (" + jitLink->path + ")";
  linkers_.deviceRuntime = findDeviceRuntime();
  if (linkers_.deviceRuntime)
    linkers_.method += "; the device runtime " + linkers_.deviceRuntime->path + " where an image uses it";
  // The key names every linker the device may use: the programs either makes are equivalent.
  identity_ = "CUDA\n" + name_ + "\nsm_" + std::to_string(sm_) + "\ndriver " + std::to_string(driver) + "\n" +
              culink + (jitLink ? "\n" + jitLink->identity + (linkers_.lto ? " lto" : "") : "") +
              (linkers_.deviceRuntime ? "\n" + linkers_.deviceRuntime->identity : "") + "\n" + devdlBuild();
}

Device::~Device() {
  if (primary_) api_.cuDevicePrimaryCtxRelease(device_);
}

llvm::Expected<std::unique_ptr<Device>> Device::openDefault() {
  auto loaded = cuda::api();
  if (!loaded) return loaded.takeError();
  const Api &cu = *loaded;
  // A program that made a context current links for it, as the CUDA runtime would.
  CUcontext current = nullptr;
  if (cu.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current) {
    CUdevice device;
    if (CUresult err = cu.cuCtxGetDevice(&device); err != CUDA_SUCCESS) return cudaFailure("cuCtxGetDevice", err);
    return std::unique_ptr<Device>(new Device(cu, device, current, false));
  }
  int count = 0;
  if (CUresult err = cu.cuDeviceGetCount(&count); err != CUDA_SUCCESS) return cudaFailure("cuDeviceGetCount", err);
  if (count == 0) return fail(ErrorCode::NotFound, "no CUDA device");
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) {
    CUdevice device;
    char name[256] = {};
    if (cu.cuDeviceGet(&device, i) == CUDA_SUCCESS) cu.cuDeviceGetName(name, sizeof name - 1, device);
    names.push_back(name);
  }
  auto chosen = chooseDevice(names, "CUDA");
  if (!chosen) return chosen.takeError();
  CUdevice device;
  if (CUresult err = cu.cuDeviceGet(&device, static_cast<int>(*chosen)); err != CUDA_SUCCESS)
    return cudaFailure("cuDeviceGet", err);
  return attach(device, nullptr);
}

llvm::Expected<std::unique_ptr<Device>> Device::attach(CUdevice device, void *context) {
  auto loaded = cuda::api();
  if (!loaded) return loaded.takeError();
  const Api &cu = *loaded;
  char name[256];
  if (CUresult err = cu.cuDeviceGetName(name, sizeof name, device); err != CUDA_SUCCESS)
    return cudaFailure("CUDA device " + llvm::Twine(device) + ": cuDeviceGetName", err);
  if (context) return std::unique_ptr<Device>(new Device(cu, device, static_cast<CUcontext>(context), false));
  CUcontext primary = nullptr;
  if (CUresult err = cu.cuDevicePrimaryCtxRetain(&primary, device); err != CUDA_SUCCESS)
    return cudaFailure("cuDevicePrimaryCtxRetain", err);
  return std::unique_ptr<Device>(new Device(cu, device, primary, true));
}

int Device::backend() const { return DEVDL_BACKEND_CUDA; }

void Device::native(devdl_native &out) const {
  out.backend = DEVDL_BACKEND_CUDA;
  out.platform = nullptr;
  out.device = reinterpret_cast<void *>(static_cast<intptr_t>(device_));
  out.context = context_;
}

llvm::Error Device::accepts(const DeviceImage &image) const {
  const bool cuda = image.format == ImageFormat::Cubin || image.format == ImageFormat::Ptx ||
                    image.format == ImageFormat::Fatbin;
  if (cuda && runsOn(image.format, image.arch, sm_)) return llvm::Error::success();
  return fail(ErrorCode::Unsupported,
              cuda ? std::string(formatName(image.format)) + " for " + std::string(image.arch) + " does not run on " +
                         name_ + " (sm_" + std::to_string(sm_) + ")"
                   : "CUDA device " + name_ + " does not link " + std::string(formatName(image.format)) + " images");
}

llvm::Expected<std::unique_ptr<backend::Program>> Device::link(std::span<const LinkInput> inputs, std::string *binary) {
  auto linked = linkBinary(inputs, false);
  if (!linked) return linked.takeError();
  auto program = load(*linked);
  if (program && binary) *binary = std::move(*linked);
  return program;
}

llvm::Expected<std::unique_ptr<backend::Program>> Device::load(std::string_view binary) {
  if (isPackedModules(binary)) {
    auto modules = unpackModules(binary);
    if (!modules) return modules.takeError();
    return loadModules(*modules);
  }
  ContextScope current(api_, context_);
  CUmodule module = nullptr;
  if (CUresult err = api_.cuModuleLoadData(&module, binary.data()); err != CUDA_SUCCESS)
    return cudaFailure("cuModuleLoadData of a program on " + name_, err);
  return std::make_unique<Program>(api_, context_, std::vector{module}, llvm::StringMap<unsigned>(), name_);
}

llvm::Expected<std::unique_ptr<backend::Program>> Device::loadModules(std::span<const PartModule> parts) {
  CallTimes times;
  ContextScope current(api_, context_);
  std::vector<CUmodule> modules;
  llvm::StringMap<unsigned> owners;
  for (const PartModule &part : parts) {
    CUmodule module = nullptr;
    if (CUresult err = api_.cuModuleLoadData(&module, part.binary.data()); err != CUDA_SUCCESS) {
      for (CUmodule loaded : modules) api_.cuModuleUnload(loaded);
      return cudaFailure("cuModuleLoadData of module " + llvm::Twine(modules.size()) + " of a program on " + name_,
                         err);
    }
    for (const std::string &name : part.names) owners.try_emplace(name, static_cast<unsigned>(modules.size()));
    modules.push_back(module);
  }
  times.mark("cuModuleLoadData");
  times.print("loaded a program of " + std::to_string(modules.size()) + " modules on " + name_);
  return std::make_unique<Program>(api_, context_, std::move(modules), std::move(owners), name_);
}

}  // namespace devdl::backend::cuda
