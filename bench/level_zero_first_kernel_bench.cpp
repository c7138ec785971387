// Time to first kernel on Level Zero (issue 19): devdl against the same Level Zero calls by hand,
// over the same driver, in one run. The driver is the tests' (tests/level_zero_driver: it links
// with SPIRV-Tools and builds on PoCL, whose kernel cache is off), through the real loader. Its
// module-program extension is on unless DEVDL_TEST_ZE_MODULE_PROGRAM=0, and both sides link the
// way that says: one module of both images, or a module each and zeModuleDynamicLink.
//
// devdl: device_dlopen(lib.spv, LAZY | GLOBAL), device_dlopen(app.spv, NOW), device_dlsym, one
// launch, both closed. By hand: read both files, zeModuleCreate (the same build flags devdl
// gives), zeModuleDynamicLink where there are two modules, zeKernelCreate, one launch, destroyed.
//
// Needs the test images and the driver: run from the build directory.
#include "devdl.h"

#include <level_zero/ze_api.h>

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

std::string image(const char *name) {
  const char *dir = std::getenv("DEVDL_TEST_IMAGES");
  return std::string(dir ? dir : "tests/images") + "/" + name;
}

std::string bytesOf(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

bool moduleProgram() {
  const char *v = std::getenv("DEVDL_TEST_ZE_MODULE_PROGRAM");
  return !(v && std::strcmp(v, "0") == 0);
}

struct Device {
  ze_driver_handle_t driver = nullptr;
  ze_device_handle_t device = nullptr;
  ze_context_handle_t context = nullptr;
  ze_command_list_handle_t list = nullptr;
  void *out = nullptr;
};

// devdl's device, and a command list and buffer made once for the launches of both sides.
const Device *device() {
  static Device d;
  if (d.list) return &d;
  devdl_native native{};
  native.size = sizeof native;
  if (device_dlnative(&native) != 0 || native.backend != DEVDL_BACKEND_LEVEL_ZERO) return nullptr;
  d.driver = static_cast<ze_driver_handle_t>(native.platform);
  d.device = static_cast<ze_device_handle_t>(native.device);
  d.context = static_cast<ze_context_handle_t>(native.context);
  ze_command_queue_desc_t queue = {ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, nullptr, 0, 0, 0,
                                   ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS, ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
  ze_device_mem_alloc_desc_t deviceDesc = {ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, nullptr, 0, 0};
  if (zeMemAllocDevice(d.context, &deviceDesc, 64, 64, d.device, &d.out) != ZE_RESULT_SUCCESS ||
      zeCommandListCreateImmediate(d.context, d.device, &queue, &d.list) != ZE_RESULT_SUCCESS)
    return nullptr;
  return &d;
}

bool launchOnce(const Device &d, ze_kernel_handle_t kernel) {
  ze_group_count_t one = {1, 1, 1};
  return zeKernelSetArgumentValue(kernel, 0, sizeof d.out, &d.out) == ZE_RESULT_SUCCESS &&
         zeKernelSetGroupSize(kernel, 1, 1, 1) == ZE_RESULT_SUCCESS &&
         zeCommandListAppendLaunchKernel(d.list, kernel, &one, nullptr, 0, nullptr) == ZE_RESULT_SUCCESS;
}

void BM_DevdlFirstKernel(benchmark::State &state) {
  const Device *d = device();
  if (!d) {
    state.SkipWithError("no Level Zero device (DEVDL_BACKEND=level_zero and the test driver in ZE_ENABLE_ALT_DRIVERS)");
    return;
  }
  const std::string lib = image("lib.spv"), app = image("app.spv");
  for (auto _ : state) {
    void *l = device_dlopen(lib.c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
    void *a = l ? device_dlopen(app.c_str(), DEVDL_NOW) : nullptr;
    void *kernel = a ? device_dlsym(a, "AppKernel") : nullptr;
    if (!kernel || !launchOnce(*d, static_cast<ze_kernel_handle_t>(kernel))) {
      state.SkipWithError(kernel ? "launch failed" : device_dlerror());
      return;
    }
    device_dlclose(a);
    device_dlclose(l);
  }
}

void BM_ByHandFirstKernel(benchmark::State &state) {
  const Device *d = device();
  if (!d) {
    state.SkipWithError("no Level Zero device (DEVDL_BACKEND=level_zero and the test driver in ZE_ENABLE_ALT_DRIVERS)");
    return;
  }
  const char *flags = "-library-compilation -ze-take-global-address";
  for (auto _ : state) {
    const std::string app = bytesOf(image("app.spv")), lib = bytesOf(image("lib.spv"));
    const uint8_t *inputs[] = {reinterpret_cast<const uint8_t *>(app.data()), reinterpret_cast<const uint8_t *>(lib.data())};
    const size_t sizes[] = {app.size(), lib.size()};
    std::vector<ze_module_handle_t> modules;
    bool built = true;
    if (moduleProgram()) {
      const char *flagList[] = {flags, flags};
      ze_module_program_exp_desc_t many = {ZE_STRUCTURE_TYPE_MODULE_PROGRAM_EXP_DESC, nullptr, 2, sizes, inputs, flagList,
                                           nullptr};
      ze_module_desc_t desc = {ZE_STRUCTURE_TYPE_MODULE_DESC, &many, ZE_MODULE_FORMAT_IL_SPIRV, 0, nullptr, nullptr, nullptr};
      ze_module_handle_t module = nullptr;
      built = zeModuleCreate(d->context, d->device, &desc, &module, nullptr) == ZE_RESULT_SUCCESS;
      modules.push_back(module);
    } else {
      for (int i = 0; i < 2 && built; ++i) {
        ze_module_desc_t desc = {ZE_STRUCTURE_TYPE_MODULE_DESC, nullptr, ZE_MODULE_FORMAT_IL_SPIRV, sizes[i], inputs[i],
                                 flags, nullptr};
        ze_module_handle_t module = nullptr;
        built = zeModuleCreate(d->context, d->device, &desc, &module, nullptr) == ZE_RESULT_SUCCESS;
        modules.push_back(module);
      }
      built = built && zeModuleDynamicLink(2, modules.data(), nullptr) == ZE_RESULT_SUCCESS;
    }
    ze_kernel_desc_t kernelDesc = {ZE_STRUCTURE_TYPE_KERNEL_DESC, nullptr, 0, "AppKernel"};
    ze_kernel_handle_t kernel = nullptr;
    if (!built || zeKernelCreate(modules[0], &kernelDesc, &kernel) != ZE_RESULT_SUCCESS || !launchOnce(*d, kernel)) {
      state.SkipWithError("Level Zero build or launch failed");
      return;
    }
    zeKernelDestroy(kernel);
    for (ze_module_handle_t module : modules) zeModuleDestroy(module);
  }
}

}  // namespace

int main(int argc, char **argv) {
  setenv("POCL_KERNEL_CACHE", "0", 1);  // before the driver starts OpenCL: every build is a real build
  setenv("DEVDL_CACHE", "0", 1);
  setenv("DEVDL_BACKEND", "level_zero", 1);
  setenv("ZE_ENABLE_ALT_DRIVERS", DEVDL_TEST_ZE_DRIVER, 0);
  benchmark::Initialize(&argc, argv);
  // Alternating, so that drift on a shared machine falls on both.
  for (int round = 0; round < 7; ++round) {  // the first round warms up
    benchmark::RegisterBenchmark("BM_DevdlFirstKernel", BM_DevdlFirstKernel)->Iterations(10)->UseRealTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("BM_ByHandFirstKernel", BM_ByHandFirstKernel)->Iterations(10)->UseRealTime()->Unit(benchmark::kMillisecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
