// Running a `kernel(global int *out)` on a Level Zero device and reading `out` back, for the
// end-to-end tests: what an application does with the ze_kernel_handle_t devdl hands it.
// The loader's entry points are taken at run time, as devdl takes its own, so that the suite that
// uses them runs where there is no Level Zero (the GPU machine).
#pragma once

#include "support/driver_library.h"
#include "devdl.h"

#include <level_zero/ze_api.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace devdl::test {

namespace ze {
#define DEVDL_TEST_ZE_FUNCTIONS(X)                                                                  \
  X(zeDeviceGetProperties) X(zeMemAllocShared) X(zeMemFree) X(zeKernelSetArgumentValue)             \
  X(zeKernelSetGroupSize) X(zeCommandListCreateImmediate) X(zeCommandListAppendLaunchKernel)        \
  X(zeCommandListAppendMemoryCopy) X(zeCommandListDestroy)
struct Api {
#define DEVDL_TEST_DECLARE(name) decltype(&::name) name = nullptr;
  DEVDL_TEST_ZE_FUNCTIONS(DEVDL_TEST_DECLARE)
#undef DEVDL_TEST_DECLARE
};

/// The loader's entry points the tests call; a failed expectation where there are none.
inline const Api &api() {
  static const Api loaded = [] {
    Api a;
    const EntryPoint entries[] = {
#define DEVDL_TEST_ENTRY(name) {#name, reinterpret_cast<void **>(&a.name)},
        DEVDL_TEST_ZE_FUNCTIONS(DEVDL_TEST_ENTRY)
#undef DEVDL_TEST_ENTRY
    };
    const std::string error = openDriverLibrary("libze_loader.so.1", "Level Zero", "the tests", entries);
    EXPECT_EQ(error, "");
    return a;
  }();
  return loaded;
}
}  // namespace ze

/// The Level Zero context and device of devdl's default backend (device_dlnative with backend 0);
/// false where that backend is not Level Zero, device_dlerror() saying why where there is none.
inline bool devdlLevelZeroDevice(ze_context_handle_t &context, ze_device_handle_t &device) {
  devdl_native native{};
  native.size = sizeof native;
  if (device_dlnative(&native) != 0 || native.backend != DEVDL_BACKEND_LEVEL_ZERO) return false;
  context = static_cast<ze_context_handle_t>(native.context);
  device = static_cast<ze_device_handle_t>(native.device);
  return true;
}

inline std::string levelZeroDeviceName(ze_device_handle_t device) {
  ze_device_properties_t properties{};
  properties.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
  const ze::Api &z = ze::api();
  if (!z.zeDeviceGetProperties || z.zeDeviceGetProperties(device, &properties) != ZE_RESULT_SUCCESS) return {};
  return properties.name;
}

/// Copies `size` bytes from `from` to `to`, either of them memory of `context` (a variable's
/// device address), through an immediate command list; false where a call failed.
inline bool copyMemory(ze_context_handle_t context, ze_device_handle_t device, void *to, const void *from,
                       size_t size) {
  const ze::Api &z = ze::api();
  if (!z.zeCommandListCreateImmediate) return false;
  ze_command_queue_desc_t queueDesc = {ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, nullptr, 0, 0, 0,
                                       ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS, ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
  ze_command_list_handle_t list = nullptr;
  if (z.zeCommandListCreateImmediate(context, device, &queueDesc, &list) != ZE_RESULT_SUCCESS) return false;
  const bool copied = z.zeCommandListAppendMemoryCopy(list, to, from, size, nullptr, 0, nullptr) == ZE_RESULT_SUCCESS;
  z.zeCommandListDestroy(list);
  return copied;
}

inline std::vector<int> runIntKernel(ze_context_handle_t context, ze_device_handle_t device, ze_kernel_handle_t kernel,
                                     size_t n) {
  const ze::Api &z = ze::api();
  if (!z.zeMemAllocShared) return {};
  void *out = nullptr;
  ze_device_mem_alloc_desc_t deviceDesc = {ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, nullptr, 0, 0};
  ze_host_mem_alloc_desc_t hostDesc = {ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, nullptr, 0};
  EXPECT_EQ(z.zeMemAllocShared(context, &deviceDesc, &hostDesc, n * sizeof(int), 64, device, &out), ZE_RESULT_SUCCESS);
  if (!out) return {};
  EXPECT_EQ(z.zeKernelSetArgumentValue(kernel, 0, sizeof out, &out), ZE_RESULT_SUCCESS);
  EXPECT_EQ(z.zeKernelSetGroupSize(kernel, 1, 1, 1), ZE_RESULT_SUCCESS);
  ze_command_queue_desc_t queueDesc = {ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, nullptr, 0, 0, 0,
                                       ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS, ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
  ze_command_list_handle_t list = nullptr;
  EXPECT_EQ(z.zeCommandListCreateImmediate(context, device, &queueDesc, &list), ZE_RESULT_SUCCESS);
  std::vector<int> result(n, -1);
  if (list) {
    ze_group_count_t groups = {static_cast<uint32_t>(n), 1, 1};
    EXPECT_EQ(z.zeCommandListAppendLaunchKernel(list, kernel, &groups, nullptr, 0, nullptr), ZE_RESULT_SUCCESS);
    EXPECT_EQ(z.zeCommandListAppendMemoryCopy(list, result.data(), out, n * sizeof(int), nullptr, 0, nullptr),
              ZE_RESULT_SUCCESS);
    z.zeCommandListDestroy(list);
  }
  z.zeMemFree(context, out);
  return result;
}

}  // namespace devdl::test
