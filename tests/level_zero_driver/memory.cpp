// The test driver's memory: host memory, each allocation wrapped in an OpenCL buffer that uses it
// in place (CL_MEM_USE_HOST_PTR), so that host and kernels share pointers.
#include "driver.h"

#include <level_zero/ze_ddi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace zetest {
namespace {

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

}  // namespace
}  // namespace zetest

// --- the table of memory.
DEVDL_ZE_EXPORT zeGetMemProcAddrTable(ze_api_version_t, ze_mem_dditable_t *t) {
  std::memset(t, 0, sizeof *t);
  t->pfnAllocDevice = zetest::memAllocDevice;
  t->pfnAllocShared = zetest::memAllocShared;
  t->pfnAllocHost = zetest::memAllocHost;
  t->pfnFree = zetest::memFree;
  return ZE_RESULT_SUCCESS;
}
