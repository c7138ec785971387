// The test driver's kernels and their launches: arguments set as OpenCL's, and command lists,
// immediate or executed by a queue, that run kernels and copies on PoCL in order, each to its end.
#include "driver.h"

#include <level_zero/ze_ddi.h>

#include <cstring>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace zetest {
namespace {

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
}  // namespace zetest

// --- the tables of kernels, command lists and command queues.
DEVDL_ZE_EXPORT zeGetKernelProcAddrTable(ze_api_version_t, ze_kernel_dditable_t *t) {
  std::memset(t, 0, sizeof *t);
  t->pfnCreate = zetest::kernelCreate;
  t->pfnDestroy = zetest::kernelDestroy;
  t->pfnSetGroupSize = zetest::kernelSetGroupSize;
  t->pfnSuggestGroupSize = zetest::kernelSuggestGroupSize;
  t->pfnSetArgumentValue = zetest::kernelSetArgumentValue;
  return ZE_RESULT_SUCCESS;
}

DEVDL_ZE_EXPORT zeGetCommandListProcAddrTable(ze_api_version_t, ze_command_list_dditable_t *t) {
  std::memset(t, 0, sizeof *t);
  t->pfnCreate = zetest::commandListCreate;
  t->pfnCreateImmediate = zetest::commandListCreateImmediate;
  t->pfnDestroy = zetest::commandListDestroy;
  t->pfnClose = zetest::commandListClose;
  t->pfnReset = zetest::commandListReset;
  t->pfnAppendLaunchKernel = zetest::appendLaunchKernel;
  t->pfnAppendMemoryCopy = zetest::appendMemoryCopy;
  t->pfnAppendBarrier = zetest::appendBarrier;
  return ZE_RESULT_SUCCESS;
}

DEVDL_ZE_EXPORT zeGetCommandQueueProcAddrTable(ze_api_version_t, ze_command_queue_dditable_t *t) {
  std::memset(t, 0, sizeof *t);
  t->pfnCreate = zetest::commandQueueCreate;
  t->pfnDestroy = zetest::commandQueueDestroy;
  t->pfnExecuteCommandLists = zetest::commandQueueExecute;
  t->pfnSynchronize = zetest::commandQueueSynchronize;
  return ZE_RESULT_SUCCESS;
}
