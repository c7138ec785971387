// What the test driver's files share: its state over PoCL, the modules behind their handles, and
// what one file calls of another. driver.cpp says what the driver is and where each part lives.
#pragma once

#include "spirv_module.h"
#include "host_placed_variables.h"

#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <level_zero/ze_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// A table getter the loader asks for: each file exports those of the entry points it has. A table
// left empty makes its calls fail in the loader with ZE_RESULT_ERROR_UNSUPPORTED_FEATURE; the
// loader refuses a driver that lacks any of them.
#define DEVDL_ZE_EXPORT extern "C" __attribute__((visibility("default"))) ze_result_t ZE_APICALL

namespace zetest {

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

// The driver's state (driver.cpp).
Driver &driver();

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

inline Module *asModule(ze_module_handle_t handle) { return reinterpret_cast<Module *>(handle); }

/// Whether ZE_experimental_module_program is reported: unless DEVDL_TEST_ZE_MODULE_PROGRAM=0.
bool moduleProgramReported();

/// Whether build flags `flags` (null: none) hold `option`, a word of its own.
bool hasOption(const char *flags, std::string_view option);

// --- compiling (build.cpp)

/// Builds SPIR bitcode or a PoCL binary into a program; "" or the log.
std::string buildBinary(std::string_view binary, const char *options, std::shared_ptr<Built> *out);

/// Compiles linked SPIR-V for the device; "" or the log.
std::string buildSpirv(const std::vector<uint32_t> &words, std::shared_ptr<Built> *out);

/// Links SPIR-V modules: `partial` leaves imports nothing defines, `library` keeps the exports.
std::string linkSpirv(const std::vector<const std::vector<uint32_t> *> &inputs, bool partial, bool library,
                      std::vector<uint32_t> *out);

// --- modules (modules.cpp)

/// One SPIR-V input of a module, its constants applied; "" or why it is refused.
std::string spirvInput(const uint8_t *bytes, size_t size, const ze_module_constants_t *constants,
                       std::vector<uint32_t> *words);

/// Makes a module from its inputs (one, or a module program's several); "" or the build log.
std::string makeModule(const std::vector<std::vector<uint32_t>> &inputs, Module *module);

// --- native binaries (native_binary.cpp)

/// A module from a native binary (the driver's own, or Intel's); "" or why not, with the result
/// to answer in `refusal` where it is not the build failure's.
std::string loadNative(const uint8_t *bytes, size_t size, Module *module, ze_result_t *refusal);

/// zeModuleGetNativeBinary.
ze_result_t ZE_APICALL moduleGetNativeBinary(ze_module_handle_t handle, size_t *size, uint8_t *out);

}  // namespace zetest
