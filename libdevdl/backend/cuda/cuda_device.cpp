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

namespace {

// "sm_90", "compute_90", "lto_90", "sm_90a": the version (90) and the suffix ('a', 'f' or 0).
struct Arch {
  int version;
  char suffix;
};
std::optional<Arch> parseArch(llvm::StringRef arch) {
  if (!arch.consume_front("sm_") && !arch.consume_front("compute_") && !arch.consume_front("lto_"))
    return std::nullopt;
  char suffix = 0;
  if (!arch.empty() && (arch.back() == 'a' || arch.back() == 'f')) {
    suffix = arch.back();
    arch = arch.drop_back();
  }
  int version;
  if (arch.getAsInteger(10, version) || version <= 0) return std::nullopt;
  return Arch{version, suffix};
}

bool cubinRunsOn(const Arch &a, int sm) {
  if (a.suffix == 'a') return a.version == sm;
  return a.version / 10 == sm / 10 && a.version <= sm;
}

bool ptxRunsOn(const Arch &a, int sm) {
  if (a.suffix == 'a') return a.version == sm;
  if (a.suffix == 'f') return a.version / 10 == sm / 10 && a.version <= sm;
  return a.version <= sm;
}

}  // namespace

bool runsOn(ImageFormat format, std::string_view arch, int sm) {
  if (format == ImageFormat::Fatbin) {
    llvm::SmallVector<llvm::StringRef, 8> members;
    llvm::StringRef(arch.data(), arch.size()).split(members, ',', -1, false);
    // LTO-IR members are left out: nvcc puts PTX beside them, and only nvJitLink reads them.
    return llvm::any_of(members, [&](llvm::StringRef member) {
      return !member.startswith("lto_") &&
             runsOn(member.startswith("compute_") ? ImageFormat::Ptx : ImageFormat::Cubin, member, sm);
    });
  }
  auto parsed = parseArch(llvm::StringRef(arch.data(), arch.size()));
  if (!parsed) return false;
  if (format == ImageFormat::Cubin) return cubinRunsOn(*parsed, sm);
  if (format == ImageFormat::Ptx) return ptxRunsOn(*parsed, sm);
  return false;
}

const readers::FatbinMember *bestMember(std::span<const readers::FatbinMember> members, int sm, bool ptxOnly) {
  const readers::FatbinMember *best = nullptr;
  auto version = [](const readers::FatbinMember &m) { return parseArch(m.arch)->version; };
  for (const readers::FatbinMember &m : members) {
    if (m.format == ImageFormat::Unknown || !runsOn(m.format, m.arch, sm)) continue;
    if (ptxOnly && m.format != ImageFormat::Ptx) continue;
    const bool better = !best || (m.format == ImageFormat::Cubin && best->format == ImageFormat::Ptx) ||
                        (m.format == best->format && version(m) > version(*best));
    if (better) best = &m;
  }
  return best;
}

bool hasLtoIrFor(std::span<const readers::FatbinMember> members, int sm) {
  return llvm::any_of(members, [&](const readers::FatbinMember &m) {
    auto arch = parseArch(m.arch);  // LTO-IR compiles for its own and later versions, as PTX does
    return m.format == ImageFormat::LtoIr && arch && ptxRunsOn(*arch, sm);
  });
}

std::string describeLinkLog(std::string_view log) {
  std::string out;
  llvm::SmallVector<llvm::StringRef, 16> lines;
  llvm::StringRef(log.data(), log.size()).split(lines, '\n', -1, false);
  for (llvm::StringRef line : lines) {
    line = line.trim();
    if (line.consume_front("error")) line = line.ltrim().drop_while([](char c) { return c == ':'; }).ltrim();
    if (line.empty()) continue;
    // Undefined reference to 'SYMBOL' in 'INPUT'
    llvm::StringRef rest = line;
    if (rest.consume_front("Undefined reference to '")) {
      auto [symbol, tail] = rest.split("' in '");
      if (!tail.empty() && tail.consume_back("'")) {
        out += (out.empty() ? "" : "\n") + tail.str() + ": undefined device symbol `" + symbol.str() + "`";
        continue;
      }
    }
    // ptxas fatal   : Unresolved extern function 'SYMBOL' (nvJitLink after LTO: no input named)
    if (size_t at = line.find("Unresolved extern "); at != llvm::StringRef::npos) {
      auto [before, symbol] = line.drop_front(at).split('\'');
      if (symbol.consume_back("'")) {
        out += (out.empty() ? "" : "\n") + std::string("undefined device symbol `") + symbol.str() + "`";
        continue;
      }
    }
    out += (out.empty() ? "" : "\n") + line.str();
  }
  return out;
}

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
