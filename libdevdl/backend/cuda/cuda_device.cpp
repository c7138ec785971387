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

// From this much PTX in a link on, ptxas's threads save more than nvJitLink's load costs (10-15 ms
// on the H100): PTX compiles at about a megabyte in 1.5 s there (bench/README.md, issue 41).
constexpr size_t kPtxForThreads = 64 << 10;

llvm::Error cudaFailure(const llvm::Twine &what, CUresult code) {
  return fail(ErrorCode::Unsupported, what + " failed: " + errorName(code));
}

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
  lto_ = !(lto && std::string_view(lto) == "0");
  jitAlways_ = linker == "nvjitlink";
  // Unasked, nvJitLink is for LTO and for much PTX (kPtxForThreads): for compiled code it links as
  // cuLink does, after 5-10 ms of loading a 100 MB library (on the H100 the seed's cubins were
  // linked in 8.3 ms, 4.1 by cuLink).
  if (linker != "culink") jitLink_ = findNvJitLink();
  if (jitAlways_ && !jitLink_)
    linkerError_ = "DEVDL_CUDA_LINKER=nvjitlink, but there is no libnvJitLink.so.13 or .so.12 (DEVDL_NVJITLINK, "
                   "LD_LIBRARY_PATH, $CUDA_HOME/lib64, /usr/local/cuda/lib64, the system's library directories)";
  const std::string culink = "cuLinkCreate, cuLinkAddData, cuLinkComplete";
  linkMethod_ = !jitLink_   ? culink
                : jitAlways_ ? "nvJitLink (" + jitLink_->path + ")" + (lto_ ? ", -lto over LTO-IR" : "")
                             : culink + "; nvJitLink where there is LTO-IR" + (lto_ ? "" : " (linked from its PTX)") +
                                   " or much PTX (" + jitLink_->path + ")";
  deviceRuntime_ = findDeviceRuntime();
  if (deviceRuntime_) linkMethod_ += "; the device runtime " + deviceRuntime_->path + " where an image uses it";
  // The key names every linker the device may use: the programs either makes are equivalent.
  identity_ = "CUDA\n" + name_ + "\nsm_" + std::to_string(sm_) + "\ndriver " + std::to_string(driver) + "\n" +
              culink + (jitLink_ ? "\n" + jitLink_->identity + (lto_ ? " lto" : "") : "") +
              (deviceRuntime_ ? "\n" + deviceRuntime_->identity : "") + "\n" + devdlBuild();
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

llvm::Expected<std::string> Device::linkBinary(std::span<const LinkInput> inputs, bool forRuntime) {
  // Everything the driver is given is made ready first, so that from cuLinkCreate on only the
  // driver runs.
  if (!linkerError_.empty()) return fail(ErrorCode::NotFound, linkerError_);
  struct Input {
    CUjitInputType type;
    Bytes data;
    const std::string *label;
  };
  std::vector<Input> ready;
  bool ltoIr = false;  // an input goes to nvJitLink as a fatbin whose LTO-IR runs here
  std::vector<std::string> texts;  // PTX must end with a NUL
  Storage scratch;                 // fatbin members inflated for this link: the driver copies its inputs
  std::deque<std::string> edits;   // copies with interposed definitions made local
  texts.reserve(inputs.size());
  for (const LinkInput &input : inputs) {
    const DeviceImage &image = *input.image;
    if (llvm::Error refused = accepts(image)) return inImage(std::move(refused), input.label);
    Input in{CU_JIT_INPUT_CUBIN, image.bytes, &input.label};
    if (image.format == ImageFormat::Ptx) {
      in.type = CU_JIT_INPUT_PTX;
    } else if (image.format == ImageFormat::Fatbin) {
      // The best member for this device: a cubin of the highest compatible version, else
      // PTX; where that member is in NVIDIA's own compression the driver picks from the whole.
      // That member alone is inflated.
      in.type = CU_JIT_INPUT_FATBINARY;
      auto members = readers::listFatbinMembers(image.bytes, scratch);
      if (!members) return inImage(members.takeError(), input.label);
      // nvJitLink takes it whole and picks its LTO-IR under -lto: optimized with every other
      // input. Not where interposition, an instance elsewhere or its statics edit it: devdl edits
      // the PTX (or, for interposition, the cubin) beside it.
      const bool optimizable = llvm::any_of(*members, [&](const readers::FatbinMember &m) {
        auto arch = parseArch(m.arch);  // LTO-IR compiles for its own and later versions, as PTX does
        return m.format == ImageFormat::LtoIr && arch && ptxRunsOn(*arch, sm_);
      });
      if (jitLink_ && lto_ && optimizable && input.interposed.empty() && input.elsewhere.empty() && input.statics.empty()) {
        ltoIr = true;
        ready.push_back(in);
        continue;
      }
      // A variable reached elsewhere, the program's or its own interposed one, or a static that
      // other programs reach here: only PTX is edited so.
      const std::string_view reached = !input.elsewhere.empty()         ? input.elsewhere.front()
                                       : !input.interposedElsewhere.empty() ? input.interposedElsewhere.front()
                                                                        : std::string_view();
      const bool fromPtx = !reached.empty() || !input.statics.empty();
      // Statics stay the cubin's own where it has no PTX (a program that would reach them is refused).
      const bool hasPtx = !reached.empty() || llvm::any_of(*members, [&](const readers::FatbinMember &m) {
        return m.format == ImageFormat::Ptx && m.readable() && runsOn(m.format, m.arch, sm_);
      });
      if (jitLink_ && lto_ && optimizable && fromPtx && hasPtx && Debug::get().on(Debug::Statistics))
        Debug::get().print(input.label + ": linked from its PTX, not its LTO-IR: " +
                           (reached.empty() ? "it keeps `" + std::string(image.statics.front()) +
                                                  "` to itself, whose one instance every program reaches"
                                            : "it reaches `" + std::string(reached) +
                                                  "` in the program that holds its instance") +
                           ", and nothing of it is inlined across images");
      const readers::FatbinMember *best = nullptr;
      auto version = [](const readers::FatbinMember &m) { return parseArch(m.arch)->version; };
      for (const readers::FatbinMember &m : *members) {
        if (m.format == ImageFormat::Unknown || !runsOn(m.format, m.arch, sm_)) continue;
        if (fromPtx && m.format != ImageFormat::Ptx && hasPtx) continue;
        const bool better = !best || (m.format == ImageFormat::Cubin && best->format == ImageFormat::Ptx) ||
                            (m.format == best->format && version(m) > version(*best));
        if (better) best = &m;
      }
      if (best && best->readable()) {
        auto member = readers::fatbinMemberImage(*best, scratch);
        if (!member) return inImage(member.takeError(), input.label);
        in.type = best->format == ImageFormat::Cubin ? CU_JIT_INPUT_CUBIN : CU_JIT_INPUT_PTX;
        in.data = *member;
      }
    }
    if (!input.interposed.empty() || !input.elsewhere.empty() || (!input.statics.empty() && in.type == CU_JIT_INPUT_PTX)) {
      // Definitions another image interposes made local, and variables whose instance is another
      // program's reached through cells, in a copy (of the member picked).
      if (in.type == CU_JIT_INPUT_FATBINARY)
        return fail(ErrorCode::Unsupported,
                    input.label + ": " +
                        (input.elsewhere.empty() && input.interposedElsewhere.empty()
                             ? "cannot make `" + std::string(input.interposed.front()) + "` local: the fatbin's member for " +
                                   name_ + " is in NVIDIA's compression, which devdl does not read"
                             : "`" +
                                   std::string(input.elsewhere.empty() ? input.interposedElsewhere.front()
                                                                       : input.elsewhere.front()) +
                                   "` cannot be reached in another program: the fatbin has no PTX for " + name_ +
                                   " that devdl reads, and only PTX is rewritten so"));
      auto edited = editedForLink(in.data, in.type == CU_JIT_INPUT_PTX ? ImageFormat::Ptx : ImageFormat::Cubin,
                                  image.statics, input.statics, input.interposed, input.elsewhere, input.interposedElsewhere,
                                  static_cast<size_t>(&input - inputs.data()), edits);
      if (!edited) return inImage(edited.takeError(), input.label);
      in.data = *edited;
    }
    if (in.type == CU_JIT_INPUT_PTX) {
      texts.emplace_back(asText(in.data));
      in.data = Bytes(reinterpret_cast<const uint8_t *>(texts.back().c_str()), texts.back().size() + 1);
    }
    ready.push_back(in);
  }
  // The addresses of the functions the images define, which CUDA does not give: a table linked in
  // where an image takes a function's address (function_table.h). Not with LTO-IR, whose functions
  // become local to the kernels; not for the CUDA runtime, which reaches none of them (beside the
  // table, virtual destructors hit an illegal instruction on the H100: docs/limits.md).
  std::string table;
  const std::string tableLabel = "devdl's table of functions";
  const bool pointers = llvm::any_of(ready, [](const Input &in) {
    return in.type == CU_JIT_INPUT_FATBINARY || takesFunctionAddresses(in.data, in.type == CU_JIT_INPUT_PTX);
  });
  if (!ltoIr && !forRuntime && pointers) {
    std::vector<std::string_view> functions;
    llvm::StringSet<> named;  // each once: a library's thousand functions are not compared pairwise
    for (const LinkInput &input : inputs)
      for (const Symbol &symbol : input.image->symbols)
        if (symbol.kind == SymbolKind::Function && !llvm::is_contained(input.interposed, symbol.name) &&
            named.insert(symbol.name).second)
          functions.push_back(symbol.name);
    table = functionTablePtx(functions, sm_);
    if (!table.empty())
      ready.push_back({CU_JIT_INPUT_PTX, Bytes(reinterpret_cast<const uint8_t *>(table.c_str()), table.size() + 1),
                       &tableLabel});
  }
  // The runtime finds the module it loads by a kernel of devdl's, which it registers.
  std::string anchor;
  const std::string anchorLabel = "devdl's kernel for the CUDA runtime";
  if (forRuntime) {
    anchor = ptxHeader(sm_) + ".visible .entry " + kRuntimeAnchor + "()\n{\n  ret;\n}\n";
    ready.push_back({CU_JIT_INPUT_PTX, Bytes(reinterpret_cast<const uint8_t *>(anchor.c_str()), anchor.size() + 1),
                     &anchorLabel});
  }
  // The device runtime's code, where an image launches kernels or calls the runtime from the device.
  auto runtimeCode = deviceRuntimeFor(inputs, deviceRuntime_);
  if (!runtimeCode) return runtimeCode.takeError();
  const std::string runtimeLabel = deviceRuntime_ ? "the CUDA device runtime (" + deviceRuntime_->path + ")" : "";
  if (*runtimeCode) ready.push_back({CU_JIT_INPUT_FATBINARY, **runtimeCode, &runtimeLabel});
  // PTX compiled in this link: nvJitLink's ptxas compiles each image's functions on DEVDL_JOBS
  // threads, where the driver's compiles them on one.
  size_t ptx = 0;
  for (const Input &in : ready) ptx += in.type == CU_JIT_INPUT_PTX ? in.data.size() : 0;
  const unsigned threads = jobs();
  const bool ptxOnThreads = ptx >= kPtxForThreads && threads > 1;
  if (jitLink_ && (ltoIr || jitAlways_ || ptxOnThreads)) {
    std::vector<JitInput> jitInputs;
    for (const Input &in : ready)
      jitInputs.push_back({in.type == CU_JIT_INPUT_PTX     ? JitInputKind::Ptx
                           : in.type == CU_JIT_INPUT_CUBIN ? JitInputKind::Cubin
                                                           : JitInputKind::Fatbin,
                           in.data, in.label});
    // -lto only where there is LTO-IR: nvJitLink refuses -lto without any.
    return linkWithJit(jitInputs, ltoIr, threads, forRuntime);
  }
  std::string errorLog(16384, '\0'), infoLog(16384, '\0');
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_INFO_LOG_BUFFER,
                            CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {errorLog.data(), reinterpret_cast<void *>(errorLog.size()), infoLog.data(),
                    reinterpret_cast<void *>(infoLog.size())};
  auto logText = [&] {
    errorLog.resize(std::strlen(errorLog.c_str()));
    return describeLinkLog(errorLog);
  };

  CallTimes times;
  ContextScope current(api_, context_);
  CUlinkState state = nullptr;
  if (CUresult err = api_.cuLinkCreate(4, options, values, &state); err != CUDA_SUCCESS)
    return cudaFailure("cuLinkCreate", err);
  times.mark("cuLinkCreate");
  struct Destroy {
    const Api &api;
    CUlinkState state;
    ~Destroy() { api.cuLinkDestroy(state); }
  } destroy{api_, state};
  for (const Input &in : ready) {
    if (CUresult err = api_.cuLinkAddData(state, in.type, const_cast<uint8_t *>(in.data.data()), in.data.size(),
                                          in.label->c_str(), 0, nullptr, nullptr);
        err != CUDA_SUCCESS) {
      const std::string log = logText();
      return fail(ErrorCode::Unsupported, *in.label + ": cuLinkAddData on " + name_ + " failed: " + errorName(err) +
                                              (log.empty() ? "" : "\n" + log));
    }
    times.mark("cuLinkAddData");
  }
  void *cubin = nullptr;
  size_t size = 0;
  if (CUresult err = api_.cuLinkComplete(state, &cubin, &size); err != CUDA_SUCCESS) {
    // The driver's log says which symbol is missing where, in devdl's words.
    const std::string log = logText();
    const bool undefined = log.find(": undefined device symbol `") != std::string::npos;
    return fail(undefined ? ErrorCode::Unresolved : ErrorCode::Unsupported,
                (log.empty() ? "" : log + "\n") + "cuLinkComplete on " + name_ + " failed: " + errorName(err));
  }
  times.mark("cuLinkComplete");
  times.print("linked " + std::to_string(inputs.size()) + " images on " + name_);
  // The linked cubin belongs to the link state: copied before the state is destroyed.
  return std::string(static_cast<const char *>(cubin), size);
}

llvm::Expected<std::string> Device::linkWithJit(std::span<const JitInput> inputs, bool lto, unsigned threads,
                                                bool whole) const {
  CallTimes times;
  std::string oneModule = whole ? "a runtime loads it" : "";  // why the program is one module
  const std::vector<ProgramPart> parts =
      lto && !whole ? planLtoParts(inputs, sm_, threads, &oneModule) : std::vector<ProgramPart>(1);
  auto version = [&] {
    auto known = nvJitLinkVersion(*jitLink_);
    return "nvJitLink " + (known ? *known : llvm::toString(known.takeError())) + " (" + nvJitLinkOptions(sm_, lto) +
           ")";
  };
  const bool statistics = Debug::get().on(Debug::Statistics);
  if (parts.size() > 1) {
    times.mark("planned the parts");
    std::vector<std::string> partTimes;
    auto modules = linkLtoParts(*jitLink_, inputs, sm_, parts, threads, statistics ? &partTimes : nullptr);
    if (!modules) return modules.takeError();
    times.mark("nvJitLink");
    if (statistics) {
      std::string each;
      for (size_t i = 0; i < parts.size(); ++i)
        each += "\n  part " + std::to_string(i) + ": " + std::to_string(parts[i].kernels.size()) + " kernels, " +
                std::to_string(parts[i].size) + " bytes of PTX; " + partTimes[i];
      times.print("linked " + std::to_string(inputs.size()) + " images for " + name_ + " with " + version() + " as " +
                  std::to_string(parts.size()) + " modules on as many threads" + each);
    }
    return packModules(*modules);
  }
  // One module: nvJitLink's own threads for the optimization and ptxas's, where there are several.
  std::vector<std::string> more = ptxasThreads(threads);
  if (lto && threads > 1) more.push_back("-split-compile=" + std::to_string(threads));
  std::string jitTimes;
  auto cubin = linkWithNvJitLink(*jitLink_, inputs, sm_, lto, more, statistics ? &jitTimes : nullptr);
  if (!cubin) return cubin.takeError();
  times.mark("nvJitLink");
  if (statistics)
    times.print("linked " + std::to_string(inputs.size()) + " images for " + name_ + " with " + version() + ", a " +
                std::to_string(cubin->size()) + "-byte cubin" + (oneModule.empty() ? "" : "; one module: " + oneModule) +
                "\n  " + jitTimes);
  return cubin;
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
