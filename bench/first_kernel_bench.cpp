// Time to first kernel (issue 3, benchmark c): devdl against hand-written OpenCL doing the same
// link and build, in one run, with PoCL's kernel cache off for both (POCL_KERNEL_CACHE=0). The
// kernel is run once on one work-item, as PoCL compiles the work-group function at the first
// launch.
//
// devdl: device_dlopen(lib.spv, GLOBAL), device_dlopen(app.spv, NOW), device_dlsym(AppKernel),
// then both closed, so that no program survives into the next iteration.
// By hand, as devdl links for the device: where it takes SPIR-V IL and has a linker (Intel's
// OpenCL runtime), read both files, clCreateProgramWithIL and clCompileProgram each,
// clLinkProgram, clCreateKernel; else (PoCL) read both files, SPIRV-Tools' linker (versions
// raised to the highest, as on PoCL nothing else links), SPIRV-LLVM-Translator to SPIR 1.2,
// clCreateProgramWithBinary, clBuildProgram("-x spir"), clCreateKernel. Both use the same
// context, made once. OCL_ICD_VENDORS picks the driver.
//
// Needs the test images: run from the build directory, or pass DEVDL_TEST_IMAGES=<dir>.
#include "backend/opencl/opencl_api.h"
#include "devdl.h"

#include <LLVMSPIRVLib/LLVMSPIRVLib.h>
#include <benchmark/benchmark.h>
#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>
#include <spirv-tools/linker.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string image(const char *name) {
  const char *dir = std::getenv("DEVDL_TEST_IMAGES");
  return std::string(dir ? dir : "tests/images") + "/" + name;
}

// Runs `kernel` once on one work-item (the queue and buffer are made once).
bool launchOnce(cl_kernel kernel) {
  static cl_command_queue queue = nullptr;
  static cl_mem buffer = nullptr;
  auto api = devdl::backend::opencl::api();
  if (!api) {
    llvm::consumeError(api.takeError());
    return false;
  }
  const auto &cl = *api;
  if (!queue) {
    devdl_native native{};
    native.size = sizeof native;
    if (device_dlnative(&native) != 0) return false;
    auto context = static_cast<cl_context>(native.context);
    queue = cl.clCreateCommandQueueWithProperties(context, static_cast<cl_device_id>(native.device), nullptr, nullptr);
    buffer = cl.clCreateBuffer(context, CL_MEM_WRITE_ONLY, sizeof(int), nullptr, nullptr);
  }
  const size_t one = 1;
  return cl.clSetKernelArg(kernel, 0, sizeof buffer, &buffer) == CL_SUCCESS &&
         cl.clEnqueueNDRangeKernel(queue, kernel, 1, nullptr, &one, nullptr, 0, nullptr, nullptr) == CL_SUCCESS &&
         cl.clFinish(queue) == CL_SUCCESS;
}

void BM_DevdlFirstKernel(benchmark::State &state) {
  const std::string lib = image("lib.spv"), app = image("app.spv");
  for (auto _ : state) {
    void *l = device_dlopen(lib.c_str(), DEVDL_NOW | DEVDL_GLOBAL);
    void *a = l ? device_dlopen(app.c_str(), DEVDL_NOW) : nullptr;
    void *kernel = a ? device_dlsym(a, "AppKernel") : nullptr;
    if (!kernel) {
      state.SkipWithError(device_dlerror());
      return;
    }
    if (!launchOnce(static_cast<cl_kernel>(kernel))) {
      state.SkipWithError("launch failed");
      return;
    }
    device_dlclose(a);
    device_dlclose(l);
  }
}

std::vector<uint32_t> readWords(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<uint32_t> words(bytes.size() / 4);
  std::memcpy(words.data(), bytes.data(), words.size() * 4);
  return words;
}

using Files = std::array<std::string, 2>;  // the application's image, then the library's

// The seed's program by the IL calls: clCreateProgramWithIL and clCompileProgram each, then
// clLinkProgram. Null with why where a call fails; what it made goes to `made`.
cl_program linkIlByHand(const devdl::backend::opencl::Api &cl, cl_context context, cl_device_id device,
                        const Files &files, std::vector<cl_program> &made, std::string &why) {
  cl_int err = CL_SUCCESS;
  for (const std::string &file : files) {
    const std::vector<uint32_t> words = readWords(file);
    cl_program object = cl.clCreateProgramWithIL(context, words.data(), words.size() * 4, &err);
    if (err != CL_SUCCESS) return why = "clCreateProgramWithIL failed", nullptr;
    made.push_back(object);
    if (cl.clCompileProgram(object, 1, &device, "", 0, nullptr, nullptr, nullptr, nullptr) != CL_SUCCESS)
      return why = "clCompileProgram failed", nullptr;
  }
  cl_program objects[2] = {made[0], made[1]};
  cl_program program = cl.clLinkProgram(context, 1, &device, "", 2, objects, nullptr, nullptr, &err);
  if (err != CL_SUCCESS) return why = "clLinkProgram failed", nullptr;
  made.push_back(program);
  return program;
}

// The seed's program as PoCL takes it: SPIRV-Tools' linker (versions raised to the highest),
// SPIRV-LLVM-Translator to SPIR 1.2, clCreateProgramWithBinary, clBuildProgram("-x spir").
cl_program buildSpirByHand(const devdl::backend::opencl::Api &cl, cl_context context, cl_device_id device,
                           const Files &files, std::vector<cl_program> &made, std::string &why) {
  std::vector<std::vector<uint32_t>> modules{readWords(files[0]), readWords(files[1])};
  const uint32_t version = std::max(modules[0][1], modules[1][1]);
  for (auto &m : modules) m[1] = version;
  spvtools::Context spv(SPV_ENV_UNIVERSAL_1_6);
  std::vector<uint32_t> linked;
  if (spvtools::Link(spv, modules, &linked) != SPV_SUCCESS) return why = "link failed", nullptr;
  SPIRV::TranslatorOpts options;
  options.enableAllExtensions();
  options.setDesiredBIsRepresentation(SPIRV::BIsRepresentation::OpenCL12);
  std::istringstream in(std::string(reinterpret_cast<const char *>(linked.data()), linked.size() * 4));
  llvm::LLVMContext llvmContext;
  llvm::Module *module = nullptr;
  std::string bitcode;
  if (!llvm::readSpirv(llvmContext, options, in, module, why)) return nullptr;
  {
    llvm::raw_string_ostream os(bitcode);
    llvm::WriteBitcodeToFile(*module, os);
  }
  delete module;
  const auto *bytes = reinterpret_cast<const unsigned char *>(bitcode.data());
  const size_t size = bitcode.size();
  cl_int err = CL_SUCCESS;
  cl_program program = cl.clCreateProgramWithBinary(context, 1, &device, &size, &bytes, nullptr, &err);
  if (err != CL_SUCCESS) return why = "clCreateProgramWithBinary failed", nullptr;
  made.push_back(program);
  if (cl.clBuildProgram(program, 1, &device, "-x spir -spir-std=1.2", nullptr, nullptr) != CL_SUCCESS)
    return why = "clBuildProgram failed", nullptr;
  return program;
}

void BM_ByHandFirstKernel(benchmark::State &state) {
  devdl_native native{};
  native.size = sizeof native;
  auto api = devdl::backend::opencl::api();
  if (device_dlnative(&native) != 0 || !api) {
    if (!api) llvm::consumeError(api.takeError());
    state.SkipWithError("no OpenCL device");
    return;
  }
  const auto &cl = *api;
  auto context = static_cast<cl_context>(native.context);
  auto device = static_cast<cl_device_id>(native.device);
  const std::string lib = image("lib.spv"), app = image("app.spv");
  char il[256] = {};
  cl_bool linker = CL_FALSE;
  cl.clGetDeviceInfo(device, CL_DEVICE_IL_VERSION, sizeof il - 1, il, nullptr);
  cl.clGetDeviceInfo(device, CL_DEVICE_LINKER_AVAILABLE, sizeof linker, &linker, nullptr);
  const bool linksIl = std::string_view(il).find("SPIR-V") != std::string_view::npos && linker;
  state.SetLabel(linksIl ? "clCompileProgram, clLinkProgram" : "SPIR, clBuildProgram");
  for (auto _ : state) {
    std::vector<cl_program> made;  // what the iteration made, released after its launch
    std::string why;
    cl_program program = linksIl ? linkIlByHand(cl, context, device, {app, lib}, made, why)
                                 : buildSpirByHand(cl, context, device, {app, lib}, made, why);
    cl_int err = CL_SUCCESS;
    cl_kernel kernel = program ? cl.clCreateKernel(program, "AppKernel", &err) : nullptr;
    const bool launched = program && err == CL_SUCCESS && launchOnce(kernel);
    if (kernel) cl.clReleaseKernel(kernel);
    for (cl_program p : made) cl.clReleaseProgram(p);
    if (!launched) {
      state.SkipWithError(program ? "clCreateKernel or the launch failed" : why.c_str());
      return;
    }
  }
}

}  // namespace

int main(int argc, char **argv) {
  setenv("POCL_KERNEL_CACHE", "0", 1);  // before OpenCL starts: every build is a real build
  setenv("DEVDL_CACHE", "0", 1);         // and devdl's disk cache (bench_cache measures it)
  benchmark::Initialize(&argc, argv);
  // Alternating, so that drift on a shared machine falls on both.
  for (int round = 0; round < 7; ++round) {  // the first round warms up
    benchmark::RegisterBenchmark("BM_DevdlFirstKernel", BM_DevdlFirstKernel)->Iterations(10)->UseRealTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("BM_ByHandFirstKernel", BM_ByHandFirstKernel)->Iterations(10)->UseRealTime()->Unit(benchmark::kMillisecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
