// Running a `kernel(global int *out)` on a Level Zero device and reading `out` back, for the
// end-to-end tests: what an application does with the ze_kernel_handle_t devdl hands it.
#pragma once

#include "devdl.h"

#include <level_zero/ze_api.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace devdl::test {

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
  if (zeDeviceGetProperties(device, &properties) != ZE_RESULT_SUCCESS) return {};
  return properties.name;
}

inline std::vector<int> runIntKernel(ze_context_handle_t context, ze_device_handle_t device, ze_kernel_handle_t kernel,
                                     size_t n) {
  void *out = nullptr;
  ze_device_mem_alloc_desc_t deviceDesc = {ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC, nullptr, 0, 0};
  ze_host_mem_alloc_desc_t hostDesc = {ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC, nullptr, 0};
  EXPECT_EQ(zeMemAllocShared(context, &deviceDesc, &hostDesc, n * sizeof(int), 64, device, &out), ZE_RESULT_SUCCESS);
  if (!out) return {};
  EXPECT_EQ(zeKernelSetArgumentValue(kernel, 0, sizeof out, &out), ZE_RESULT_SUCCESS);
  EXPECT_EQ(zeKernelSetGroupSize(kernel, 1, 1, 1), ZE_RESULT_SUCCESS);
  ze_command_queue_desc_t queueDesc = {ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC, nullptr, 0, 0, 0,
                                       ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS, ZE_COMMAND_QUEUE_PRIORITY_NORMAL};
  ze_command_list_handle_t list = nullptr;
  EXPECT_EQ(zeCommandListCreateImmediate(context, device, &queueDesc, &list), ZE_RESULT_SUCCESS);
  std::vector<int> result(n, -1);
  if (list) {
    ze_group_count_t groups = {static_cast<uint32_t>(n), 1, 1};
    EXPECT_EQ(zeCommandListAppendLaunchKernel(list, kernel, &groups, nullptr, 0, nullptr), ZE_RESULT_SUCCESS);
    EXPECT_EQ(zeCommandListAppendMemoryCopy(list, result.data(), out, n * sizeof(int), nullptr, 0, nullptr),
              ZE_RESULT_SUCCESS);
    zeCommandListDestroy(list);
  }
  zeMemFree(context, out);
  return result;
}

}  // namespace devdl::test
