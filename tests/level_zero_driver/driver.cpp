// A Level Zero driver for the tests (a test double: no Intel GPU here). The real loader (libze1)
// loads it through ZE_ENABLE_ALT_DRIVERS and finds its entry points through the
// ze*/zet*/zes*Get*ProcAddrTable functions a driver exports, so devdl goes through the loader a
// user has. Kernels run for real, on the CPU through PoCL: a module's SPIR-V is linked with
// SPIRV-Tools' linker, translated to SPIR with the SPIRV-LLVM-Translator and built by OpenCL;
// memory is host memory that OpenCL buffers use in place (CL_MEM_USE_HOST_PTR), so host and
// kernels share pointers. (PoCL 3.1's SVM pointers as kernel arguments trip its assertions.)
//
// It keeps the rules of the Level Zero specification that devdl depends on:
// - a module with imports is unlinked until zeModuleDynamicLink: zeKernelCreate fails with
//   ZE_RESULT_ERROR_INVALID_MODULE_UNLINKED;
// - a link must hold every module the imports need: ZE_RESULT_ERROR_MODULE_LINK_FAILURE and a
//   log naming the symbol; an import two modules of the link export is refused (ambiguous);
// - a module exports functions only when built with -library-compilation, variables only with
//   -ze-take-global-address;
// - a module's imports are linked once; a linked module may serve later links as an exporter.
// Intel native binaries (ocloc's) built for its GPU family, Gen12LP, are taken as native modules
// and run from the SPIR-V they carry; others are refused (ZE_RESULT_ERROR_INVALID_NATIVE_BINARY).
// ZE_experimental_module_program (several SPIR-V inputs in one module) is reported unless
// DEVDL_TEST_ZE_MODULE_PROGRAM=0, so that both of devdl's paths run.
//
// A program's variables live in host memory the driver allocates, at addresses built into its
// kernels (devdl's own placement, backend/spirv/place_variables.h): PoCL 3.1 gives each kernel a
// copy of its own of program-scope variables, where a device has one instance for all kernels of
// a program, and the host reads and writes it.
//
// What it does not do: function pointers (zeModuleGetFunctionPointer answers
// ZE_RESULT_ERROR_UNSUPPORTED_FEATURE: PoCL builds each kernel apart), events, fences, images; a
// module linked in two links has its code (and variables) in each.
#include "spirv_module.h"
#include "host_placed_variables.h"

#include "backend/spirv/link.h"
#include "backend/spirv/translation.h"
#include "backend/spirv/translator_limits.h"

#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <level_zero/ze_api.h>
#include <level_zero/ze_ddi.h>
#include <level_zero/zes_ddi.h>
#include <level_zero/zet_ddi.h>
#include <llvm/Object/ELF.h>
#include <llvm/Support/Endian.h>
#include <llvm/Support/Error.h>
#include <spirv-tools/libspirv.hpp>
#include <spirv-tools/linker.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace {

using zetest::Linkage;

// OpenCL: PoCL's CPU device, found at zeInit.
struct Cl {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  std::string name;
};

struct Driver {
  std::once_flag once;
  ze_result_t initialized = ZE_RESULT_ERROR_UNINITIALIZED;
  Cl cl;
  std::mutex mutex;  // of allocations
  // Host memory, each allocation wrapped in a buffer that uses it (PoCL's CPU device works in it
  // directly): start -> size and buffer.
  std::map<uintptr_t, std::pair<size_t, cl_mem>> allocations;
};

Driver &driver() {
  static Driver *d = new Driver;  // never destroyed: the loader may call after exit handlers
  return *d;
}

// Handles are pointers to these; the loader passes them through (one driver, no intercept).
struct DriverObject {};
struct DeviceObject {};
DriverObject theDriver;
DeviceObject theDevice;
struct Context {};
struct BuildLog {
  std::string text;
};

// A built OpenCL program: what the kernels of one or more modules come from.
struct Built {
  cl_program program = nullptr;
  std::unique_ptr<devdl::test::HostVariables> variables;  // at addresses its kernels use; none without variables
  ~Built() {
    if (program) clReleaseProgram(program);
  }
};

struct Module {
  std::vector<uint32_t> words;  // its SPIR-V, specialization constants applied
  Linkage linkage;
  bool library = false;        // -library-compilation: exports functions
  bool globalAddresses = false;  // -ze-take-global-address: exports variables
  bool linked = false;         // its imports are resolved
  std::shared_ptr<Built> built;  // once linked and built
  bool builtAlone = false;     // built from its own SPIR-V alone (its native binary carries it)
  std::atomic<int> kernels = 0;  // made from it (devdl makes kernels from several threads)
  bool exports(const std::string &name) const {
    return (library && linkage.exportedFunctions.count(name)) || (globalAddresses && linkage.exportedVariables.count(name));
  }
};

struct Kernel {
  cl_kernel kernel = nullptr;
  std::vector<zetest::ArgKind> args;
  uint32_t group[3] = {1, 1, 1};
};

struct CommandList {
  bool immediate = false;
  std::vector<std::function<ze_result_t()>> commands;  // recorded, for a list executed later
};
struct CommandQueue {};

ze_result_t run(CommandList *list, std::function<ze_result_t()> command) {
  if (!list) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (list->immediate) return command();  // synchronous: done when the call returns
  list->commands.push_back(std::move(command));
  return ZE_RESULT_SUCCESS;
}

void newLog(ze_module_build_log_handle_t *out, std::string text) {
  if (out) *out = reinterpret_cast<ze_module_build_log_handle_t>(new BuildLog{std::move(text)});
}

bool moduleProgramReported() {
  const char *v = std::getenv("DEVDL_TEST_ZE_MODULE_PROGRAM");
  return !(v && std::string_view(v) == "0");
}

bool hasOption(const char *flags, std::string_view option) {
  if (!flags) return false;
  const std::string_view all(flags);
  for (size_t at = all.find(option); at != std::string_view::npos; at = all.find(option, at + 1)) {
    const bool starts = at == 0 || all[at - 1] == ' ';
    const bool ends = at + option.size() == all.size() || all[at + option.size()] == ' ';
    if (starts && ends) return true;
  }
  return false;
}

std::string clBuildLog(cl_program program) {
  size_t size = 0;
  clGetProgramBuildInfo(program, driver().cl.device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
  std::string log(size, '\0');
  clGetProgramBuildInfo(program, driver().cl.device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

// Builds SPIR bitcode or a PoCL binary into a program; "" or the log.
std::string buildBinary(std::string_view binary, const char *options, std::shared_ptr<Built> *out) {
  const Cl &cl = driver().cl;
  const auto *bytes = reinterpret_cast<const unsigned char *>(binary.data());
  const size_t size = binary.size();
  cl_int status = CL_SUCCESS, err = CL_SUCCESS;
  cl_program program = clCreateProgramWithBinary(cl.context, 1, &cl.device, &size, &bytes, &status, &err);
  if (err != CL_SUCCESS || status != CL_SUCCESS) {
    if (program) clReleaseProgram(program);
    return "clCreateProgramWithBinary failed (" + std::to_string(err != CL_SUCCESS ? err : status) + ")";
  }
  auto built = std::make_shared<Built>();
  built->program = program;
  if ((err = clBuildProgram(program, 1, &cl.device, options, nullptr, nullptr)) != CL_SUCCESS)
    return "clBuildProgram failed (" + std::to_string(err) + "): " + clBuildLog(program);
  *out = std::move(built);
  return {};
}

// Compiles linked SPIR-V for the device: translated to SPIR with its variables moved to host
// memory (devdl's own placement, as for PoCL), built by PoCL. "" or the log.
std::string buildSpirv(const std::vector<uint32_t> &words, std::shared_ptr<Built> *out) {
  if (llvm::Error err = devdl::backend::checkTranslatable(words)) return llvm::toString(std::move(err));
  std::unique_ptr<devdl::test::HostVariables> variables;  // until the program holds them
  auto spir = devdl::backend::inProcess::spirvToSpir(words, {}, false, devdl::test::placeInto(variables));
  if (!spir) return llvm::toString(spir.takeError());
  if (std::string why = buildBinary(*spir, "-x spir -spir-std=1.2", out); !why.empty()) return why;
  (*out)->variables = std::move(variables);
  return {};
}

// Links SPIR-V modules with SPIRV-Tools' linker (the driver's own, as Intel's has its own):
// `partial` leaves imports nothing defines, `library` keeps the exports.
std::string linkSpirv(const std::vector<const std::vector<uint32_t> *> &inputs, bool partial, bool library,
                      std::vector<uint32_t> *out) {
  if (inputs.size() == 1) {
    *out = *inputs.front();
    devdl::backend::unnameLocalVariables(*out);  // a global pointer is asked by the exported name
    return {};
  }
  spvtools::Context context(SPV_ENV_UNIVERSAL_1_6);
  std::string messages;
  context.SetMessageConsumer([&](spv_message_level_t, const char *, const spv_position_t &, const char *message) {
    messages += std::string(messages.empty() ? "" : "\n") + message;
  });
  // Every input raised to the highest SPIR-V version among them (SPIRV-Tools 2023.1 refuses to
  // link different versions; a later version reads an earlier one's modules).
  uint32_t version = 0;
  for (const auto *words : inputs) version = std::max(version, (*words)[1]);
  std::vector<std::vector<uint32_t>> raised;
  raised.reserve(inputs.size());
  std::vector<const uint32_t *> binaries;
  std::vector<size_t> sizes;
  for (const auto *words : inputs) {
    raised.push_back(*words);
    raised.back()[1] = version;
    devdl::backend::unnameLocalVariables(raised.back());
    binaries.push_back(raised.back().data());
    sizes.push_back(raised.back().size());
  }
  spvtools::LinkerOptions options;
  options.SetAllowPartialLinkage(partial);
  options.SetCreateLibrary(partial || library);
  std::vector<uint32_t> linked;
  if (spvtools::Link(context, binaries.data(), sizes.data(), binaries.size(), &linked, options) != SPV_SUCCESS)
    return "SPIR-V link failed: " + messages;
  // One variable per builtin, as a driver's compiler pairs them (SPIRV-Tools' linker does not).
  auto merged = devdl::backend::mergeBuiltinVariables(std::move(linked));
  if (!merged) return llvm::toString(merged.takeError());
  *out = std::move(*merged);
  return {};
}

// --- the native binary: the module's SPIR-V, and PoCL's binary where it was built alone.
constexpr char kNativeMagic[8] = {'Z', 'E', 'T', 'E', 'S', 'T', 'N', 'B'};
struct NativeHeader {
  char magic[8];
  uint32_t version;
  uint32_t flags;  // 1 library, 2 global addresses, 4 linked
  uint64_t spirvBytes;
  uint64_t programBytes;  // PoCL's binary, where the module was built alone and has no variables
};

std::string programBinary(cl_program program) {
  size_t size = 0;
  if (clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) != CL_SUCCESS) return {};
  std::string binary(size, '\0');
  unsigned char *pointer = reinterpret_cast<unsigned char *>(binary.data());
  if (clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof pointer, &pointer, nullptr) != CL_SUCCESS) return {};
  return binary;
}

// --- ze entry points

ze_result_t ZE_APICALL init(ze_init_flags_t) {
  Driver &d = driver();
  std::call_once(d.once, [&] {
    cl_uint count = 0;
    if (clGetPlatformIDs(0, nullptr, &count) != CL_SUCCESS || count == 0) return;
    std::vector<cl_platform_id> platforms(count);
    clGetPlatformIDs(count, platforms.data(), nullptr);
    for (cl_platform_id platform : platforms) {
      cl_device_id device = nullptr;
      cl_uint devices = 0;
      if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_CPU, 1, &device, &devices) != CL_SUCCESS || devices == 0) continue;
      char name[256] = {};
      clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof name - 1, name, nullptr);
      cl_int err = CL_SUCCESS;
      cl_context context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
      if (err != CL_SUCCESS) continue;
      cl_command_queue queue = clCreateCommandQueueWithProperties(context, device, nullptr, &err);
      if (err != CL_SUCCESS) {
        clReleaseContext(context);
        continue;
      }
      d.cl = {platform, device, context, queue, name};
      d.initialized = ZE_RESULT_SUCCESS;
      return;
    }
  });
  return d.initialized;
}

ze_result_t ZE_APICALL driverGet(uint32_t *count, ze_driver_handle_t *drivers) {
  if (!count) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (driver().initialized != ZE_RESULT_SUCCESS) return ZE_RESULT_ERROR_UNINITIALIZED;
  if (*count == 0 || !drivers) {
    *count = 1;
    return ZE_RESULT_SUCCESS;
  }
  drivers[0] = reinterpret_cast<ze_driver_handle_t>(&theDriver);
  *count = 1;
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL driverGetApiVersion(ze_driver_handle_t, ze_api_version_t *version) {
  *version = ZE_API_VERSION_1_4;
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL driverGetProperties(ze_driver_handle_t, ze_driver_properties_t *properties) {
  std::memset(properties->uuid.id, 0, sizeof properties->uuid.id);
  std::memcpy(properties->uuid.id, "devdl-test-ze", 13);
  properties->driverVersion = 1;
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL driverGetExtensionProperties(ze_driver_handle_t, uint32_t *count,
                                                     ze_driver_extension_properties_t *properties) {
  std::vector<std::pair<const char *, uint32_t>> extensions = {{ZE_LINKAGE_INSPECTION_EXT_NAME, ZE_LINKAGE_INSPECTION_EXT_VERSION_1_0}};
  if (moduleProgramReported()) extensions.emplace_back(ZE_MODULE_PROGRAM_EXP_NAME, ZE_MODULE_PROGRAM_EXP_VERSION_1_0);
  if (!properties || *count == 0) {
    *count = static_cast<uint32_t>(extensions.size());
    return ZE_RESULT_SUCCESS;
  }
  const uint32_t n = std::min<uint32_t>(*count, static_cast<uint32_t>(extensions.size()));
  for (uint32_t i = 0; i < n; ++i) {
    std::snprintf(properties[i].name, ZE_MAX_EXTENSION_NAME, "%s", extensions[i].first);
    properties[i].version = extensions[i].second;
  }
  *count = n;
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL deviceGet(ze_driver_handle_t, uint32_t *count, ze_device_handle_t *devices) {
  if (!count) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (*count == 0 || !devices) {
    *count = 1;
    return ZE_RESULT_SUCCESS;
  }
  devices[0] = reinterpret_cast<ze_device_handle_t>(&theDevice);
  *count = 1;
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL deviceGetProperties(ze_device_handle_t, ze_device_properties_t *p) {
  p->type = ZE_DEVICE_TYPE_GPU;
  p->vendorId = 0x8086;
  p->deviceId = 0x9a49;  // a Tiger Lake GPU's, as ocloc's -device tgllp builds for
  p->flags = ZE_DEVICE_PROPERTY_FLAG_INTEGRATED;
  p->subdeviceId = 0;
  p->coreClockRate = 1000;
  p->maxMemAllocSize = 1ull << 30;
  p->maxHardwareContexts = 1;
  p->maxCommandQueuePriority = 0;
  p->numThreadsPerEU = 1;
  p->physicalEUSimdWidth = 8;
  p->numEUsPerSubslice = 1;
  p->numSubslicesPerSlice = 1;
  p->numSlices = 1;
  p->timerResolution = 1;
  p->timestampValidBits = 64;
  p->kernelTimestampValidBits = 64;
  std::memset(p->uuid.id, 0, sizeof p->uuid.id);
  std::snprintf(p->name, ZE_MAX_DEVICE_NAME, "devdl test driver on PoCL (%s)", driver().cl.name.c_str());
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL deviceGetModuleProperties(ze_device_handle_t, ze_device_module_properties_t *p) {
  p->spirvVersionSupported = ZE_MAKE_VERSION(1, 4);
  p->flags = ZE_DEVICE_MODULE_FLAG_FP64 | ZE_DEVICE_MODULE_FLAG_INT64_ATOMICS;
  p->fp16flags = 0;
  p->fp32flags = ZE_DEVICE_FP_FLAG_ROUND_TO_NEAREST;
  p->fp64flags = ZE_DEVICE_FP_FLAG_ROUND_TO_NEAREST;
  p->maxArgumentsSize = 1024;
  p->printfBufferSize = 0;
  std::memset(p->nativeKernelSupported.id, 0, sizeof p->nativeKernelSupported.id);
  std::memcpy(p->nativeKernelSupported.id, "ZETESTNB", 8);
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL contextCreate(ze_driver_handle_t, const ze_context_desc_t *, ze_context_handle_t *out) {
  *out = reinterpret_cast<ze_context_handle_t>(new Context);
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL contextDestroy(ze_context_handle_t context) {
  delete reinterpret_cast<Context *>(context);
  return ZE_RESULT_SUCCESS;
}

// One SPIR-V input of a module, its constants applied; "" or why it is refused.
std::string spirvInput(const uint8_t *bytes, size_t size, const ze_module_constants_t *constants,
                       std::vector<uint32_t> *words) {
  if (!bytes || size == 0 || size % 4 != 0) return "the SPIR-V input is empty or not whole words";
  words->resize(size / 4);
  std::memcpy(words->data(), bytes, size);
  spvtools::SpirvTools tools(SPV_ENV_UNIVERSAL_1_4);  // the version the device reports
  std::string messages;
  tools.SetMessageConsumer([&](spv_message_level_t, const char *, const spv_position_t &, const char *message) {
    messages += std::string(messages.empty() ? "" : "\n") + message;
  });
  if (!tools.Validate(*words)) return "invalid SPIR-V: " + messages;
  if (constants && constants->numConstants) {
    std::map<uint32_t, const void *> values;
    for (uint32_t i = 0; i < constants->numConstants; ++i) values[constants->pConstantIds[i]] = constants->pConstantValues[i];
    return zetest::applySpecConstants(*words, values);
  }
  return {};
}

// Makes a module from its inputs (one, or a module program's several); "" or the build log.
std::string makeModule(const std::vector<std::vector<uint32_t>> &inputs, Module *module) {
  std::vector<const std::vector<uint32_t> *> pointers;
  for (const auto &words : inputs) pointers.push_back(&words);
  // A module program's inputs link at creation; what none of them exports stays an import.
  Linkage all;
  for (const auto &words : inputs) {
    Linkage one;
    if (std::string why = zetest::readLinkage(words, &one); !why.empty()) return why;
    all.kernels.insert(one.kernels.begin(), one.kernels.end());
    all.kernelArgs.insert(one.kernelArgs.begin(), one.kernelArgs.end());
    all.exportedFunctions.insert(one.exportedFunctions.begin(), one.exportedFunctions.end());
    all.exportedVariables.insert(one.exportedVariables.begin(), one.exportedVariables.end());
    all.imports.insert(one.imports.begin(), one.imports.end());
  }
  for (const std::string &name : all.exportedFunctions) all.imports.erase(name);
  for (const std::string &name : all.exportedVariables) all.imports.erase(name);
  // Linked as a library: the module keeps its exports (in its native binary too, which has only
  // the linked SPIR-V to say what the module exports).
  if (std::string why = linkSpirv(pointers, !all.imports.empty(), true, &module->words); !why.empty()) return why;
  module->linkage = std::move(all);
  if (!module->linkage.imports.empty()) return {};  // unlinked until zeModuleDynamicLink
  module->linked = true;
  module->builtAlone = true;
  return buildSpirv(module->words, &module->built);
}

// An Intel native binary from ocloc (its ELF container): taken where it was built for this
// device's GPU family (Gen12LP: the Tiger Lake this driver reports), and run from the SPIR-V it
// carries (a test double cannot run Intel's GPU code), with the build options it was built with.
constexpr uint32_t kIntelOptions = 0xff000006, kIntelSpirv = 0xff000009, kIntelProgram = 0xff000005;
constexpr uint32_t kIntelProgramMagic = 0x494e5443, kGen12lp = 18;

std::string loadIntelNative(const uint8_t *bytes, size_t size, Module *module, ze_result_t *refusal) {
  auto file = llvm::object::ELF64LEFile::create(llvm::StringRef(reinterpret_cast<const char *>(bytes), size));
  if (!file) return "not a native binary of this device: " + llvm::toString(file.takeError());
  auto sections = file->sections();
  if (!sections) return "not a native binary of this device: " + llvm::toString(sections.takeError());
  std::string options;
  llvm::ArrayRef<uint8_t> spirv;
  uint32_t family = 0;
  for (const auto &section : *sections) {
    auto contents = file->getSectionContents(section);
    if (!contents) continue;
    if (section.sh_type == kIntelOptions) options.assign(contents->begin(), contents->end());
    if (section.sh_type == kIntelSpirv) spirv = *contents;
    if (section.sh_type == kIntelProgram && contents->size() >= 12 &&
        llvm::support::endian::read32le(contents->data()) == kIntelProgramMagic)
      family = llvm::support::endian::read32le(contents->data() + 8);
  }
  if (family != kGen12lp) {
    *refusal = ZE_RESULT_ERROR_INVALID_NATIVE_BINARY;
    return "the native binary is for GPU family " + std::to_string(family) + ", this device is Gen12LP (" +
           std::to_string(kGen12lp) + ")";
  }
  std::vector<std::vector<uint32_t>> inputs(1);
  if (std::string why = spirvInput(spirv.data(), spirv.size(), nullptr, &inputs[0]); !why.empty()) return why;
  module->library = hasOption(options.c_str(), "-library-compilation");
  module->globalAddresses = hasOption(options.c_str(), "-ze-take-global-address");
  return makeModule(inputs, module);
}

std::string loadNative(const uint8_t *bytes, size_t size, Module *module, ze_result_t *refusal) {
  if (bytes && size >= 4 && std::memcmp(bytes, "\x7f" "ELF", 4) == 0) return loadIntelNative(bytes, size, module, refusal);
  NativeHeader header;
  if (!bytes || size < sizeof header) return "not a native binary of this device";
  std::memcpy(&header, bytes, sizeof header);
  if (std::memcmp(header.magic, kNativeMagic, 8) != 0 || header.version != 1 ||
      header.spirvBytes % 4 != 0 || header.spirvBytes > size - sizeof header ||
      header.programBytes != size - sizeof header - header.spirvBytes)
    return "not a native binary of this device";
  module->words.resize(header.spirvBytes / 4);
  std::memcpy(module->words.data(), bytes + sizeof header, header.spirvBytes);
  module->library = header.flags & 1;
  module->globalAddresses = header.flags & 2;
  if (std::string why = zetest::readLinkage(module->words, &module->linkage); !why.empty()) return why;
  if (!module->linkage.imports.empty() && !(header.flags & 4)) return {};  // unlinked until zeModuleDynamicLink
  module->linked = true;
  module->builtAlone = true;
  if (!header.programBytes) return buildSpirv(module->words, &module->built);
  return buildBinary({reinterpret_cast<const char *>(bytes) + sizeof header + header.spirvBytes, header.programBytes},
                     "", &module->built);
}

ze_result_t ZE_APICALL moduleCreate(ze_context_handle_t, ze_device_handle_t, const ze_module_desc_t *desc,
                                    ze_module_handle_t *out, ze_module_build_log_handle_t *logOut) {
  if (!desc || !out) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  auto module = std::make_unique<Module>();
  std::string log;
  const auto *program = static_cast<const ze_module_program_exp_desc_t *>(desc->pNext);
  if (program && program->stype != ZE_STRUCTURE_TYPE_MODULE_PROGRAM_EXP_DESC) program = nullptr;
  if (program && !moduleProgramReported()) return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
  ze_result_t failure = ZE_RESULT_ERROR_MODULE_BUILD_FAILURE;
  if (desc->format == ZE_MODULE_FORMAT_NATIVE) {
    log = loadNative(desc->pInputModule, desc->inputSize, module.get(), &failure);
  } else if (desc->format != ZE_MODULE_FORMAT_IL_SPIRV) {
    return ZE_RESULT_ERROR_INVALID_ENUMERATION;
  } else {
    std::vector<std::vector<uint32_t>> inputs;
    const uint32_t count = program ? program->count : 1;
    for (uint32_t i = 0; i < count && log.empty(); ++i) {
      const char *flags = program ? (program->pBuildFlags ? program->pBuildFlags[i] : nullptr) : desc->pBuildFlags;
      module->library |= hasOption(flags, "-library-compilation");
      module->globalAddresses |= hasOption(flags, "-ze-take-global-address");
      const ze_module_constants_t *constants =
          program ? (program->pConstants ? program->pConstants[i] : nullptr) : desc->pConstants;
      log = spirvInput(program ? program->pInputModules[i] : desc->pInputModule,
                       program ? program->inputSizes[i] : desc->inputSize, constants, &inputs.emplace_back());
      if (!log.empty() && count > 1) log = "input " + std::to_string(i) + ": " + log;
    }
    if (log.empty()) log = makeModule(inputs, module.get());
  }
  newLog(logOut, log);
  if (!log.empty()) return failure;
  *out = reinterpret_cast<ze_module_handle_t>(module.release());
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL moduleDestroy(ze_module_handle_t module) {
  delete reinterpret_cast<Module *>(module);
  return ZE_RESULT_SUCCESS;
}

Module *asModule(ze_module_handle_t handle) { return reinterpret_cast<Module *>(handle); }

// How many modules of a link, module `importer` aside, export `name`.
int exportersOf(const std::string &name, uint32_t importer, uint32_t count, ze_module_handle_t *handles) {
  int exporters = 0;
  for (uint32_t j = 0; j < count; ++j)
    if (j != importer && asModule(handles[j])->exports(name)) ++exporters;
  return exporters;
}

ze_result_t ZE_APICALL moduleDynamicLink(uint32_t count, ze_module_handle_t *handles, ze_module_build_log_handle_t *logOut) {
  std::string log;
  // Every import of every module still unlinked must be exported by exactly one other module.
  for (uint32_t i = 0; i < count; ++i) {
    Module *module = asModule(handles[i]);
    if (module->linked) continue;
    for (const std::string &name : module->linkage.imports) {
      const int exporters = exportersOf(name, i, count, handles);
      if (exporters == 0) log += "error: module " + std::to_string(i) + " imports `" + name + "`, which no module of the link exports\n";
      else if (exporters > 1) log += "error: `" + name + "` imported by module " + std::to_string(i) + " is exported by " +
                                     std::to_string(exporters) + " modules of the link (ambiguous)\n";
    }
  }
  if (!log.empty()) {
    newLog(logOut, log);
    return ZE_RESULT_ERROR_MODULE_LINK_FAILURE;
  }
  std::vector<const std::vector<uint32_t> *> inputs;
  bool needed = false;
  for (uint32_t i = 0; i < count; ++i) {
    inputs.push_back(&asModule(handles[i])->words);
    needed |= !asModule(handles[i])->linked;
  }
  if (needed) {
    std::vector<uint32_t> words;
    std::shared_ptr<Built> built;
    log = linkSpirv(inputs, false, false, &words);
    if (log.empty()) log = buildSpirv(words, &built);
    if (!log.empty()) {
      newLog(logOut, log);
      return ZE_RESULT_ERROR_MODULE_LINK_FAILURE;
    }
    // The modules whose kernels are still to come take theirs from the link's program, so that
    // they share its variables; a module linked before keeps what its kernels use.
    for (uint32_t i = 0; i < count; ++i) {
      Module *module = asModule(handles[i]);
      if (!module->linked || module->kernels == 0) {
        module->built = built;
        module->builtAlone = count == 1;
      }
      module->linked = true;
    }
  }
  newLog(logOut, "");
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL moduleInspectLinkage(ze_linkage_inspection_ext_desc_t *desc, uint32_t count,
                                            ze_module_handle_t *handles, ze_module_build_log_handle_t *logOut) {
  std::string log;
  for (uint32_t i = 0; i < count; ++i) {
    const Module *module = asModule(handles[i]);
    const std::string prefix = "module " + std::to_string(i) + ": ";
    if (desc->flags & ZE_LINKAGE_INSPECTION_EXT_FLAG_IMPORTS)
      for (const std::string &name : module->linkage.imports) log += prefix + "import " + name + "\n";
    if (desc->flags & ZE_LINKAGE_INSPECTION_EXT_FLAG_UNRESOLVABLE_IMPORTS)
      for (const std::string &name : module->linkage.imports) {
        if (exportersOf(name, i, count, handles) == 0) log += prefix + "unresolvable import " + name + "\n";
      }
    if (desc->flags & ZE_LINKAGE_INSPECTION_EXT_FLAG_EXPORTS)
      for (const auto *names : {&module->linkage.exportedFunctions, &module->linkage.exportedVariables})
        for (const std::string &name : *names)
          if (module->exports(name)) log += prefix + "export " + name + "\n";
  }
  newLog(logOut, log);
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL moduleGetNativeBinary(ze_module_handle_t handle, size_t *size, uint8_t *out) {
  const Module *module = asModule(handle);
  // PoCL's binary has the variables' addresses of this process in it: a module with variables
  // is built again from its SPIR-V.
  const bool whole = module->builtAlone && module->built && !module->built->variables;
  const std::string program = whole ? programBinary(module->built->program) : std::string();
  NativeHeader header{};
  std::memcpy(header.magic, kNativeMagic, 8);
  header.version = 1;
  header.flags = (module->library ? 1 : 0) | (module->globalAddresses ? 2 : 0) | (module->builtAlone ? 4 : 0);
  header.spirvBytes = module->words.size() * 4;
  header.programBytes = program.size();
  const size_t total = sizeof header + header.spirvBytes + header.programBytes;
  if (!out) {
    *size = total;
    return ZE_RESULT_SUCCESS;
  }
  if (*size < total) return ZE_RESULT_ERROR_INVALID_SIZE;
  std::memcpy(out, &header, sizeof header);
  std::memcpy(out + sizeof header, module->words.data(), header.spirvBytes);
  std::memcpy(out + sizeof header + header.spirvBytes, program.data(), program.size());
  *size = total;
  return ZE_RESULT_SUCCESS;
}

// A variable's address: one the module exports (as built), once linked.
ze_result_t addressOf(ze_module_handle_t handle, const char *name, const std::set<std::string> &exported, bool allowed,
                      ze_result_t notFound, size_t *size, void **out) {
  const Module *module = asModule(handle);
  if (!name || !out) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (!allowed || !exported.count(name)) return notFound;
  if (!module->linked) return ZE_RESULT_ERROR_INVALID_MODULE_UNLINKED;
  const auto *variable = module->built->variables ? module->built->variables->find(name) : nullptr;
  if (!variable) return notFound;
  *out = module->built->variables->data(*variable);
  if (size) *size = variable->size;
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL moduleGetGlobalPointer(ze_module_handle_t handle, const char *name, size_t *size, void **out) {
  const Module *module = asModule(handle);
  return addressOf(handle, name, module->linkage.exportedVariables, module->globalAddresses,
                   ZE_RESULT_ERROR_INVALID_GLOBAL_NAME, size, out);
}

ze_result_t ZE_APICALL moduleGetFunctionPointer(ze_module_handle_t, const char *, void **) {
  return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
}

ze_result_t ZE_APICALL moduleGetKernelNames(ze_module_handle_t handle, uint32_t *count, const char **names) {
  const Module *module = asModule(handle);
  if (!names || *count == 0) {
    *count = static_cast<uint32_t>(module->linkage.kernels.size());
    return ZE_RESULT_SUCCESS;
  }
  uint32_t i = 0;
  for (const std::string &name : module->linkage.kernels) {
    if (i == *count) break;
    names[i++] = name.c_str();
  }
  *count = i;
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL buildLogGetString(ze_module_build_log_handle_t handle, size_t *size, char *out) {
  const auto *log = reinterpret_cast<const BuildLog *>(handle);
  if (!out) {
    *size = log->text.size() + 1;
    return ZE_RESULT_SUCCESS;
  }
  const size_t n = std::min(*size, log->text.size() + 1);
  if (n == 0) return ZE_RESULT_ERROR_INVALID_SIZE;
  std::memcpy(out, log->text.c_str(), n - 1);
  out[n - 1] = '\0';
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL buildLogDestroy(ze_module_build_log_handle_t handle) {
  delete reinterpret_cast<BuildLog *>(handle);
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL kernelCreate(ze_module_handle_t handle, const ze_kernel_desc_t *desc, ze_kernel_handle_t *out) {
  Module *module = asModule(handle);
  if (!desc || !desc->pKernelName || !out) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (!module->linked) return ZE_RESULT_ERROR_INVALID_MODULE_UNLINKED;
  if (!module->linkage.kernels.count(desc->pKernelName)) return ZE_RESULT_ERROR_INVALID_KERNEL_NAME;
  cl_int err = CL_SUCCESS;
  cl_kernel kernel = clCreateKernel(module->built->program, desc->pKernelName, &err);
  if (err != CL_SUCCESS) return ZE_RESULT_ERROR_INVALID_KERNEL_NAME;
  ++module->kernels;
  *out = reinterpret_cast<ze_kernel_handle_t>(new Kernel{kernel, module->linkage.kernelArgs[desc->pKernelName], {1, 1, 1}});
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL kernelDestroy(ze_kernel_handle_t handle) {
  auto *kernel = reinterpret_cast<Kernel *>(handle);
  clReleaseKernel(kernel->kernel);
  delete kernel;
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL kernelSetGroupSize(ze_kernel_handle_t handle, uint32_t x, uint32_t y, uint32_t z) {
  if (x == 0 || y == 0 || z == 0) return ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION;
  auto *kernel = reinterpret_cast<Kernel *>(handle);
  kernel->group[0] = x, kernel->group[1] = y, kernel->group[2] = z;
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL kernelSuggestGroupSize(ze_kernel_handle_t, uint32_t x, uint32_t y, uint32_t z, uint32_t *gx,
                                               uint32_t *gy, uint32_t *gz) {
  auto largestDivisor = [](uint32_t n) {
    for (uint32_t g : {64u, 32u, 16u, 8u, 4u, 2u})
      if (n % g == 0) return g;
    return 1u;
  };
  *gx = largestDivisor(x), *gy = largestDivisor(y), *gz = largestDivisor(z);
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL kernelSetArgumentValue(ze_kernel_handle_t handle, uint32_t index, size_t size, const void *value) {
  auto *kernel = reinterpret_cast<Kernel *>(handle);
  if (index >= kernel->args.size()) return ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX;
  cl_int err = CL_SUCCESS;
  if (kernel->args[index] == zetest::ArgKind::Buffer) {
    if (size != sizeof(void *)) return ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE;
    const void *pointer = value ? *static_cast<void *const *>(value) : nullptr;
    cl_mem buffer = nullptr;
    if (pointer) {
      std::lock_guard lock(driver().mutex);
      auto it = driver().allocations.find(reinterpret_cast<uintptr_t>(pointer));
      if (it == driver().allocations.end()) return ZE_RESULT_ERROR_INVALID_ARGUMENT;  // not the start of an allocation
      buffer = it->second.second;
    }
    err = clSetKernelArg(kernel->kernel, index, sizeof buffer, &buffer);
  } else {
    err = clSetKernelArg(kernel->kernel, index, size, value);  // a local buffer's size when value is null
  }
  if (err == CL_INVALID_ARG_INDEX) return ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX;
  if (err == CL_INVALID_ARG_SIZE) return ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE;
  return err == CL_SUCCESS ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_INVALID_ARGUMENT;
}

ze_result_t alloc(size_t size, size_t alignment, void **out) {
  if (!out) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  if (size == 0) return ZE_RESULT_ERROR_UNSUPPORTED_SIZE;
  const size_t align = std::max<size_t>(alignment, 4096);
  void *memory = std::aligned_alloc(align, (size + align - 1) / align * align);
  if (!memory) return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
  cl_int err = CL_SUCCESS;
  cl_mem buffer = clCreateBuffer(driver().cl.context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, size, memory, &err);
  if (err != CL_SUCCESS) {
    std::free(memory);
    return ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
  }
  std::lock_guard lock(driver().mutex);
  driver().allocations[reinterpret_cast<uintptr_t>(memory)] = {size, buffer};
  *out = memory;
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL memAllocDevice(ze_context_handle_t, const ze_device_mem_alloc_desc_t *, size_t size, size_t alignment,
                                      ze_device_handle_t, void **out) {
  return alloc(size, alignment, out);
}
ze_result_t ZE_APICALL memAllocShared(ze_context_handle_t, const ze_device_mem_alloc_desc_t *, const ze_host_mem_alloc_desc_t *,
                                      size_t size, size_t alignment, ze_device_handle_t, void **out) {
  return alloc(size, alignment, out);
}
ze_result_t ZE_APICALL memAllocHost(ze_context_handle_t, const ze_host_mem_alloc_desc_t *, size_t size, size_t alignment,
                                    void **out) {
  return alloc(size, alignment, out);
}

ze_result_t ZE_APICALL memFree(ze_context_handle_t, void *memory) {
  cl_mem buffer = nullptr;
  {
    std::lock_guard lock(driver().mutex);
    auto it = driver().allocations.find(reinterpret_cast<uintptr_t>(memory));
    if (it == driver().allocations.end()) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    buffer = it->second.second;
    driver().allocations.erase(it);
  }
  clReleaseMemObject(buffer);
  std::free(memory);
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL commandListCreate(ze_context_handle_t, ze_device_handle_t, const ze_command_list_desc_t *,
                                         ze_command_list_handle_t *out) {
  *out = reinterpret_cast<ze_command_list_handle_t>(new CommandList);
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL commandListCreateImmediate(ze_context_handle_t, ze_device_handle_t, const ze_command_queue_desc_t *,
                                                  ze_command_list_handle_t *out) {
  auto *list = new CommandList;
  list->immediate = true;
  *out = reinterpret_cast<ze_command_list_handle_t>(list);
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL commandListDestroy(ze_command_list_handle_t list) {
  delete reinterpret_cast<CommandList *>(list);
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL commandListClose(ze_command_list_handle_t) { return ZE_RESULT_SUCCESS; }

ze_result_t ZE_APICALL commandListReset(ze_command_list_handle_t list) {
  reinterpret_cast<CommandList *>(list)->commands.clear();
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL appendLaunchKernel(ze_command_list_handle_t list, ze_kernel_handle_t handle,
                                          const ze_group_count_t *groups, ze_event_handle_t, uint32_t, ze_event_handle_t *) {
  if (!groups) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;
  const auto *kernel = reinterpret_cast<const Kernel *>(handle);
  const size_t local[3] = {kernel->group[0], kernel->group[1], kernel->group[2]};
  const size_t global[3] = {groups->groupCountX * local[0], groups->groupCountY * local[1], groups->groupCountZ * local[2]};
  cl_kernel clKernel = kernel->kernel;
  return run(reinterpret_cast<CommandList *>(list), [=] {
    const Cl &cl = driver().cl;
    cl_int err = clEnqueueNDRangeKernel(cl.queue, clKernel, 3, nullptr, global, local, 0, nullptr, nullptr);
    if (err == CL_SUCCESS) err = clFinish(cl.queue);
    return err == CL_SUCCESS ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_DEVICE_LOST;
  });
}

ze_result_t ZE_APICALL appendMemoryCopy(ze_command_list_handle_t list, void *to, const void *from, size_t size,
                                        ze_event_handle_t, uint32_t, ze_event_handle_t *) {
  return run(reinterpret_cast<CommandList *>(list), [=] {
    std::memmove(to, from, size);  // kernels work in the host's memory, and are done
    return ZE_RESULT_SUCCESS;
  });
}

ze_result_t ZE_APICALL appendBarrier(ze_command_list_handle_t, ze_event_handle_t, uint32_t, ze_event_handle_t *) {
  return ZE_RESULT_SUCCESS;  // commands run in order, each to its end
}

ze_result_t ZE_APICALL commandQueueCreate(ze_context_handle_t, ze_device_handle_t, const ze_command_queue_desc_t *,
                                          ze_command_queue_handle_t *out) {
  *out = reinterpret_cast<ze_command_queue_handle_t>(new CommandQueue);
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL commandQueueDestroy(ze_command_queue_handle_t queue) {
  delete reinterpret_cast<CommandQueue *>(queue);
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL commandQueueExecute(ze_command_queue_handle_t, uint32_t count, ze_command_list_handle_t *lists,
                                           ze_fence_handle_t) {
  for (uint32_t i = 0; i < count; ++i)
    for (auto &command : reinterpret_cast<CommandList *>(lists[i])->commands)
      if (ze_result_t result = command(); result != ZE_RESULT_SUCCESS) return result;
  return ZE_RESULT_SUCCESS;
}

ze_result_t ZE_APICALL commandQueueSynchronize(ze_command_queue_handle_t, uint64_t) { return ZE_RESULT_SUCCESS; }

}  // namespace

// --- the tables the loader asks for. A table left empty makes its calls fail in the loader with
// ZE_RESULT_ERROR_UNSUPPORTED_FEATURE; the loader refuses a driver that lacks any of them.
#define DEVDL_ZE_EXPORT extern "C" __attribute__((visibility("default"))) ze_result_t ZE_APICALL

DEVDL_ZE_EXPORT zeGetGlobalProcAddrTable(ze_api_version_t, ze_global_dditable_t *t) {
  std::memset(t, 0, sizeof *t);
  t->pfnInit = init;
  return ZE_RESULT_SUCCESS;
}

DEVDL_ZE_EXPORT zeGetDriverProcAddrTable(ze_api_version_t, ze_driver_dditable_t *t) {
  std::memset(t, 0, sizeof *t);
  t->pfnGet = driverGet;
  t->pfnGetApiVersion = driverGetApiVersion;
  t->pfnGetProperties = driverGetProperties;
  t->pfnGetExtensionProperties = driverGetExtensionProperties;
  return ZE_RESULT_SUCCESS;
}

DEVDL_ZE_EXPORT zeGetDeviceProcAddrTable(ze_api_version_t, ze_device_dditable_t *t) {
  std::memset(t, 0, sizeof *t);
  t->pfnGet = deviceGet;
  t->pfnGetProperties = deviceGetProperties;
  t->pfnGetModuleProperties = deviceGetModuleProperties;
  return ZE_RESULT_SUCCESS;
}

DEVDL_ZE_EXPORT zeGetContextProcAddrTable(ze_api_version_t, ze_context_dditable_t *t) {
  std::memset(t, 0, sizeof *t);
  t->pfnCreate = contextCreate;
  t->pfnDestroy = contextDestroy;
  return ZE_RESULT_SUCCESS;
}

DEVDL_ZE_EXPORT zeGetModuleProcAddrTable(ze_api_version_t, ze_module_dditable_t *t) {
  std::memset(t, 0, sizeof *t);
  t->pfnCreate = moduleCreate;
  t->pfnDestroy = moduleDestroy;
  t->pfnDynamicLink = moduleDynamicLink;
  t->pfnGetNativeBinary = moduleGetNativeBinary;
  t->pfnGetGlobalPointer = moduleGetGlobalPointer;
  t->pfnGetFunctionPointer = moduleGetFunctionPointer;
  t->pfnGetKernelNames = moduleGetKernelNames;
  t->pfnInspectLinkageExt = moduleInspectLinkage;
  return ZE_RESULT_SUCCESS;
}

DEVDL_ZE_EXPORT zeGetModuleBuildLogProcAddrTable(ze_api_version_t, ze_module_build_log_dditable_t *t) {
  std::memset(t, 0, sizeof *t);
  t->pfnGetString = buildLogGetString;
  t->pfnDestroy = buildLogDestroy;
  return ZE_RESULT_SUCCESS;
}

DEVDL_ZE_EXPORT zeGetKernelProcAddrTable(ze_api_version_t, ze_kernel_dditable_t *t) {
  std::memset(t, 0, sizeof *t);
  t->pfnCreate = kernelCreate;
  t->pfnDestroy = kernelDestroy;
  t->pfnSetGroupSize = kernelSetGroupSize;
  t->pfnSuggestGroupSize = kernelSuggestGroupSize;
  t->pfnSetArgumentValue = kernelSetArgumentValue;
  return ZE_RESULT_SUCCESS;
}

DEVDL_ZE_EXPORT zeGetMemProcAddrTable(ze_api_version_t, ze_mem_dditable_t *t) {
  std::memset(t, 0, sizeof *t);
  t->pfnAllocDevice = memAllocDevice;
  t->pfnAllocShared = memAllocShared;
  t->pfnAllocHost = memAllocHost;
  t->pfnFree = memFree;
  return ZE_RESULT_SUCCESS;
}

DEVDL_ZE_EXPORT zeGetCommandListProcAddrTable(ze_api_version_t, ze_command_list_dditable_t *t) {
  std::memset(t, 0, sizeof *t);
  t->pfnCreate = commandListCreate;
  t->pfnCreateImmediate = commandListCreateImmediate;
  t->pfnDestroy = commandListDestroy;
  t->pfnClose = commandListClose;
  t->pfnReset = commandListReset;
  t->pfnAppendLaunchKernel = appendLaunchKernel;
  t->pfnAppendMemoryCopy = appendMemoryCopy;
  t->pfnAppendBarrier = appendBarrier;
  return ZE_RESULT_SUCCESS;
}

DEVDL_ZE_EXPORT zeGetCommandQueueProcAddrTable(ze_api_version_t, ze_command_queue_dditable_t *t) {
  std::memset(t, 0, sizeof *t);
  t->pfnCreate = commandQueueCreate;
  t->pfnDestroy = commandQueueDestroy;
  t->pfnExecuteCommandLists = commandQueueExecute;
  t->pfnSynchronize = commandQueueSynchronize;
  return ZE_RESULT_SUCCESS;
}

// Tables of what this driver does not do: present, empty.
#define DEVDL_ZE_EMPTY_TABLE(getter, table)                 \
  DEVDL_ZE_EXPORT getter(ze_api_version_t, table *t) {      \
    std::memset(t, 0, sizeof *t);                           \
    return ZE_RESULT_SUCCESS;                               \
  }
DEVDL_ZE_EMPTY_TABLE(zeGetEventProcAddrTable, ze_event_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zeGetEventPoolProcAddrTable, ze_event_pool_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zeGetFenceProcAddrTable, ze_fence_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zeGetImageProcAddrTable, ze_image_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zeGetPhysicalMemProcAddrTable, ze_physical_mem_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zeGetSamplerProcAddrTable, ze_sampler_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zeGetVirtualMemProcAddrTable, ze_virtual_mem_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zetGetDeviceProcAddrTable, zet_device_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zetGetContextProcAddrTable, zet_context_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zetGetCommandListProcAddrTable, zet_command_list_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zetGetKernelProcAddrTable, zet_kernel_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zetGetModuleProcAddrTable, zet_module_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zetGetDebugProcAddrTable, zet_debug_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zetGetMetricProcAddrTable, zet_metric_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zetGetMetricGroupProcAddrTable, zet_metric_group_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zetGetMetricQueryProcAddrTable, zet_metric_query_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zetGetMetricQueryPoolProcAddrTable, zet_metric_query_pool_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zetGetMetricStreamerProcAddrTable, zet_metric_streamer_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zetGetTracerExpProcAddrTable, zet_tracer_exp_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zesGetDeviceProcAddrTable, zes_device_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zesGetDriverProcAddrTable, zes_driver_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zesGetDiagnosticsProcAddrTable, zes_diagnostics_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zesGetEngineProcAddrTable, zes_engine_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zesGetFabricPortProcAddrTable, zes_fabric_port_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zesGetFanProcAddrTable, zes_fan_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zesGetFirmwareProcAddrTable, zes_firmware_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zesGetFrequencyProcAddrTable, zes_frequency_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zesGetLedProcAddrTable, zes_led_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zesGetMemoryProcAddrTable, zes_memory_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zesGetPerformanceFactorProcAddrTable, zes_performance_factor_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zesGetPowerProcAddrTable, zes_power_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zesGetPsuProcAddrTable, zes_psu_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zesGetRasProcAddrTable, zes_ras_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zesGetSchedulerProcAddrTable, zes_scheduler_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zesGetStandbyProcAddrTable, zes_standby_dditable_t)
DEVDL_ZE_EMPTY_TABLE(zesGetTemperatureProcAddrTable, zes_temperature_dditable_t)
