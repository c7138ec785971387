// An OpenCL layer for the tests (a test double: no Intel OpenCL driver here). The ICD loader
// (ocl-icd) puts it in front of PoCL through OPENCL_LAYERS, and it makes PoCL's CPU device look as
// an Intel driver does to devdl: a device that takes SPIR-V IL and gives the addresses of a
// program's variables (cl_intel_global_variable_pointers: clGetDeviceGlobalVariablePointerINTEL),
// which the host copies to and from with cl_intel_unified_shared_memory's clEnqueueMemcpyINTEL.
// Everything else goes to PoCL as it is.
//
// A program made from IL is translated to SPIR by the SPIRV-LLVM-Translator and built by PoCL,
// its variables in host memory at addresses built into its kernels (devdl's own placement, as the
// Level Zero test driver keeps them): PoCL 3.1 gives each kernel a copy of its own of
// program-scope variables, where a device has one instance for all the kernels of a program. Its
// binary (CL_PROGRAM_BINARIES) is the IL behind a header of the layer's, made again from it where
// a program is created from that binary, as a driver may keep IL in its binaries.
//
// What it does not do: a linker for IL (CL_DEVICE_LINKER_AVAILABLE is false), specialization
// constants of IL, the rest of unified shared memory; clEnqueueMemcpyINTEL waits for the queue
// and copies on the host, without events. A program's variables stay until PoCL gives its
// handle to another program: PoCL tells when a program goes neither by a callback nor by a
// reference count that counts its kernels.
#include "host_placed_variables.h"

#include "backend/spirv/translation.h"
#include "backend/spirv/translator_limits.h"

#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl_icd.h>
#include <CL/cl_layer.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace {

const _cl_icd_dispatch *next = nullptr;  // PoCL's, through the loader
_cl_icd_dispatch dispatch;               // this layer's: PoCL's but for what it answers itself

constexpr std::string_view kExtensions = " cl_intel_global_variable_pointers cl_intel_unified_shared_memory";
constexpr std::string_view kIlVersion = "SPIR-V_1.2";
constexpr std::string_view kBinaryMagic = "devdl-test-layer IL\n";

// A program the layer made from IL: the IL, and where its variables are.
struct IlProgram {
  std::vector<uint32_t> words;
  std::unique_ptr<devdl::test::HostVariables> variables;  // none where it has no variables
};
std::mutex lock;
std::map<cl_program, std::shared_ptr<IlProgram>> &programs() {
  static auto *made = new std::map<cl_program, std::shared_ptr<IlProgram>>;
  return *made;
}
std::shared_ptr<IlProgram> ilProgram(cl_program program) {
  std::lock_guard hold(lock);
  auto it = programs().find(program);
  return it == programs().end() ? nullptr : it->second;
}
// A program PoCL made otherwise: not the layer's, even where it has the handle of one gone.
cl_program notIl(cl_program program) {
  std::lock_guard hold(lock);
  programs().erase(program);
  return program;
}

// An info answer: `value` copied out as OpenCL's queries do.
cl_int answer(const void *value, size_t size, size_t capacity, void *out, size_t *sizeOut) {
  if (sizeOut) *sizeOut = size;
  if (!out) return CL_SUCCESS;
  if (capacity < size) return CL_INVALID_VALUE;
  std::memcpy(out, value, size);
  return CL_SUCCESS;
}

cl_int CL_API_CALL getDeviceInfo(cl_device_id device, cl_device_info param, size_t capacity, void *out,
                                 size_t *sizeOut) {
  if (param == CL_DEVICE_EXTENSIONS) {
    size_t size = 0;
    if (cl_int err = next->clGetDeviceInfo(device, param, 0, nullptr, &size); err != CL_SUCCESS) return err;
    std::string extensions(size, '\0');
    if (cl_int err = next->clGetDeviceInfo(device, param, size, extensions.data(), nullptr); err != CL_SUCCESS)
      return err;
    extensions.resize(extensions.find('\0') == std::string::npos ? size : extensions.find('\0'));
    extensions += kExtensions;
    return answer(extensions.c_str(), extensions.size() + 1, capacity, out, sizeOut);
  }
  if (param == CL_DEVICE_IL_VERSION) return answer(kIlVersion.data(), kIlVersion.size() + 1, capacity, out, sizeOut);
  if (param == CL_DEVICE_LINKER_AVAILABLE) {
    const cl_bool no = CL_FALSE;
    return answer(&no, sizeof no, capacity, out, sizeOut);
  }
  return next->clGetDeviceInfo(device, param, capacity, out, sizeOut);
}

// A PoCL program of SPIR made from `words`, its variables placed; recorded as the layer's.
cl_program fromIl(cl_context context, std::vector<uint32_t> words, cl_int *errOut) {
  auto fail = [&](cl_int err) -> cl_program {
    if (errOut) *errOut = err;
    return nullptr;
  };
  size_t size = 0;  // the context's devices: the program is for the first
  if (cl_int err = next->clGetContextInfo(context, CL_CONTEXT_DEVICES, 0, nullptr, &size); err != CL_SUCCESS)
    return fail(err);
  std::vector<cl_device_id> devices(size / sizeof(cl_device_id));
  if (devices.empty()) return fail(CL_INVALID_CONTEXT);
  if (cl_int err = next->clGetContextInfo(context, CL_CONTEXT_DEVICES, size, devices.data(), nullptr); err != CL_SUCCESS)
    return fail(err);
  auto made = std::make_shared<IlProgram>();
  made->words = std::move(words);
  if (llvm::Error err = devdl::backend::checkTranslatable(made->words)) {
    llvm::consumeError(std::move(err));
    return fail(CL_INVALID_VALUE);
  }
  auto spir = devdl::backend::inProcess::spirvToSpir(made->words, {}, false, devdl::test::placeInto(made->variables));
  if (!spir) {
    llvm::consumeError(spir.takeError());
    return fail(CL_INVALID_VALUE);
  }
  const auto *bytes = reinterpret_cast<const unsigned char *>(spir->data());
  const size_t bitcodeSize = spir->size();
  cl_program program =
      next->clCreateProgramWithBinary(context, 1, devices.data(), &bitcodeSize, &bytes, nullptr, errOut);
  if (!program) return nullptr;
  std::lock_guard hold(lock);
  programs()[program] = std::move(made);
  return program;
}

cl_program CL_API_CALL createProgramWithIl(cl_context context, const void *il, size_t length, cl_int *errOut) {
  if (!il || length == 0 || length % 4) {
    if (errOut) *errOut = CL_INVALID_VALUE;
    return nullptr;
  }
  std::vector<uint32_t> words(length / 4);
  std::memcpy(words.data(), il, length);
  return fromIl(context, std::move(words), errOut);
}

cl_program CL_API_CALL createProgramWithBinary(cl_context context, cl_uint count, const cl_device_id *devices,
                                               const size_t *sizes, const unsigned char **binaries, cl_int *status,
                                               cl_int *errOut) {
  const bool ours = count == 1 && sizes && binaries && binaries[0] && sizes[0] > kBinaryMagic.size() &&
                    (sizes[0] - kBinaryMagic.size()) % 4 == 0 &&
                    std::string_view(reinterpret_cast<const char *>(binaries[0]), kBinaryMagic.size()) == kBinaryMagic;
  if (!ours) return notIl(next->clCreateProgramWithBinary(context, count, devices, sizes, binaries, status, errOut));
  std::vector<uint32_t> words((sizes[0] - kBinaryMagic.size()) / 4);
  std::memcpy(words.data(), binaries[0] + kBinaryMagic.size(), words.size() * 4);
  cl_int err = CL_SUCCESS;
  cl_program program = fromIl(context, std::move(words), &err);
  if (status) status[0] = err == CL_SUCCESS ? CL_SUCCESS : CL_INVALID_BINARY;
  if (errOut) *errOut = err == CL_SUCCESS ? CL_SUCCESS : CL_INVALID_BINARY;
  return program;
}

cl_program CL_API_CALL createProgramWithSource(cl_context context, cl_uint count, const char **strings,
                                               const size_t *lengths, cl_int *errOut) {
  return notIl(next->clCreateProgramWithSource(context, count, strings, lengths, errOut));
}

cl_program CL_API_CALL createProgramWithBuiltInKernels(cl_context context, cl_uint count, const cl_device_id *devices,
                                                       const char *names, cl_int *errOut) {
  return notIl(next->clCreateProgramWithBuiltInKernels(context, count, devices, names, errOut));
}

cl_program CL_API_CALL linkProgram(cl_context context, cl_uint count, const cl_device_id *devices, const char *options,
                                   cl_uint inputs, const cl_program *programs,
                                   void(CL_CALLBACK *notify)(cl_program, void *), void *data, cl_int *errOut) {
  return notIl(next->clLinkProgram(context, count, devices, options, inputs, programs, notify, data, errOut));
}

cl_int CL_API_CALL buildProgram(cl_program program, cl_uint count, const cl_device_id *devices, const char *options,
                                void(CL_CALLBACK *notify)(cl_program, void *), void *data) {
  if (!ilProgram(program)) return next->clBuildProgram(program, count, devices, options, notify, data);
  const std::string spir = "-x spir -spir-std=1.2 " + std::string(options ? options : "");
  return next->clBuildProgram(program, count, devices, spir.c_str(), notify, data);
}

cl_int CL_API_CALL getProgramInfo(cl_program program, cl_program_info param, size_t capacity, void *out,
                                  size_t *sizeOut) {
  auto made = ilProgram(program);
  if (!made || (param != CL_PROGRAM_BINARY_SIZES && param != CL_PROGRAM_BINARIES))
    return next->clGetProgramInfo(program, param, capacity, out, sizeOut);
  std::string binary(kBinaryMagic);
  binary.append(reinterpret_cast<const char *>(made->words.data()), made->words.size() * 4);
  if (param == CL_PROGRAM_BINARY_SIZES) {
    const size_t size = binary.size();
    return answer(&size, sizeof size, capacity, out, sizeOut);
  }
  if (sizeOut) *sizeOut = sizeof(unsigned char *);
  if (!out) return CL_SUCCESS;
  if (capacity < sizeof(unsigned char *)) return CL_INVALID_VALUE;
  if (unsigned char *to = static_cast<unsigned char **>(out)[0]) std::memcpy(to, binary.data(), binary.size());
  return CL_SUCCESS;
}

cl_int CL_API_CALL getDeviceGlobalVariablePointer(cl_device_id, cl_program program, const char *name, size_t *sizeOut,
                                                  void **pointerOut) {
  auto made = ilProgram(program);
  if (!made) return CL_INVALID_PROGRAM;
  if (!name || !pointerOut) return CL_INVALID_VALUE;
  const auto *variable = made->variables ? made->variables->find(name) : nullptr;
  if (!variable) return CL_INVALID_ARG_VALUE;
  *pointerOut = made->variables->data(*variable);
  if (sizeOut) *sizeOut = variable->size;
  return CL_SUCCESS;
}

cl_int CL_API_CALL enqueueMemcpy(cl_command_queue queue, cl_bool, void *destination, const void *source, size_t size,
                                 cl_uint waits, const cl_event *, cl_event *event) {
  if (waits || event) return CL_INVALID_OPERATION;  // not in this double
  if (!destination || !source) return CL_INVALID_VALUE;
  if (cl_int err = next->clFinish(queue); err != CL_SUCCESS) return err;
  std::memmove(destination, source, size);
  return CL_SUCCESS;
}

void *CL_API_CALL extensionFunction(cl_platform_id platform, const char *name) {
  if (name && std::string_view(name) == "clGetDeviceGlobalVariablePointerINTEL")
    return reinterpret_cast<void *>(&getDeviceGlobalVariablePointer);
  if (name && std::string_view(name) == "clEnqueueMemcpyINTEL") return reinterpret_cast<void *>(&enqueueMemcpy);
  return next->clGetExtensionFunctionAddressForPlatform(platform, name);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) CL_API_ENTRY cl_int CL_API_CALL clGetLayerInfo(cl_layer_info param,
                                                                                       size_t capacity, void *out,
                                                                                       size_t *sizeOut) {
  if (param != CL_LAYER_API_VERSION) return CL_INVALID_VALUE;
  const cl_layer_api_version version = CL_LAYER_API_VERSION_100;
  return answer(&version, sizeof version, capacity, out, sizeOut);
}

__attribute__((visibility("default"))) CL_API_ENTRY cl_int CL_API_CALL
clInitLayer(cl_uint entries, const _cl_icd_dispatch *target, cl_uint *entriesOut, const _cl_icd_dispatch **layerOut) {
  constexpr cl_uint kEntries = sizeof(_cl_icd_dispatch) / sizeof(void *);
  if (!target || !entriesOut || !layerOut || entries < kEntries) return CL_INVALID_VALUE;
  next = target;
  dispatch = *target;
  dispatch.clGetDeviceInfo = &getDeviceInfo;
  dispatch.clCreateProgramWithIL = &createProgramWithIl;
  dispatch.clCreateProgramWithBinary = &createProgramWithBinary;
  dispatch.clCreateProgramWithSource = &createProgramWithSource;
  dispatch.clCreateProgramWithBuiltInKernels = &createProgramWithBuiltInKernels;
  dispatch.clLinkProgram = &linkProgram;
  dispatch.clBuildProgram = &buildProgram;
  dispatch.clGetProgramInfo = &getProgramInfo;
  dispatch.clGetExtensionFunctionAddressForPlatform = &extensionFunction;
  *entriesOut = kEntries;
  *layerOut = &dispatch;
  return CL_SUCCESS;
}

}  // extern "C"
