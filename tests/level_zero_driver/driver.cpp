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
//
// Its files, by subject (driver.h is what they share; each exports the tables of its entry points):
// this one the driver, its device and contexts, and the empty tables; modules.cpp modules and their
// links; build.cpp how a module is compiled; native_binary.cpp native binaries; kernels.cpp kernels
// and the command lists and queues that launch them; memory.cpp allocations.
#include "driver.h"

#include <level_zero/ze_ddi.h>
#include <level_zero/zes_ddi.h>
#include <level_zero/zet_ddi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zetest {

Driver &driver() {
  static Driver *d = new Driver;  // never destroyed: the loader may call after exit handlers
  return *d;
}

bool moduleProgramReported() {
  const char *v = std::getenv("DEVDL_TEST_ZE_MODULE_PROGRAM");
  return !(v && std::string_view(v) == "0");
}

namespace {

// Handles are pointers to these; the loader passes them through (one driver, no intercept).
struct DriverObject {};
struct DeviceObject {};
DriverObject theDriver;
DeviceObject theDevice;
struct Context {};

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

}  // namespace
}  // namespace zetest

// --- the tables of the driver, its device and contexts.
DEVDL_ZE_EXPORT zeGetGlobalProcAddrTable(ze_api_version_t, ze_global_dditable_t *t) {
  std::memset(t, 0, sizeof *t);
  t->pfnInit = zetest::init;
  return ZE_RESULT_SUCCESS;
}

DEVDL_ZE_EXPORT zeGetDriverProcAddrTable(ze_api_version_t, ze_driver_dditable_t *t) {
  std::memset(t, 0, sizeof *t);
  t->pfnGet = zetest::driverGet;
  t->pfnGetApiVersion = zetest::driverGetApiVersion;
  t->pfnGetProperties = zetest::driverGetProperties;
  t->pfnGetExtensionProperties = zetest::driverGetExtensionProperties;
  return ZE_RESULT_SUCCESS;
}

DEVDL_ZE_EXPORT zeGetDeviceProcAddrTable(ze_api_version_t, ze_device_dditable_t *t) {
  std::memset(t, 0, sizeof *t);
  t->pfnGet = zetest::deviceGet;
  t->pfnGetProperties = zetest::deviceGetProperties;
  t->pfnGetModuleProperties = zetest::deviceGetModuleProperties;
  return ZE_RESULT_SUCCESS;
}

DEVDL_ZE_EXPORT zeGetContextProcAddrTable(ze_api_version_t, ze_context_dditable_t *t) {
  std::memset(t, 0, sizeof *t);
  t->pfnCreate = zetest::contextCreate;
  t->pfnDestroy = zetest::contextDestroy;
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
