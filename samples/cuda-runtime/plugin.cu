// A plugin the program opens with dlopen: its kernel calls libcudamath's and libcudauser's device
// functions, and another adds to libcudamath's table.
#include "cudamath.h"
#include "cudauser.h"

__global__ void plugin_kernel(int *out) {
  const int i = threadIdx.x;
  out[i] = mathf(table[i]) + twice(i);
}

__global__ void plugin_bump() { table[threadIdx.x] += 1000; }

extern "C" int plugin_run(int *out) {
  int *device = nullptr;
  if (cudaError_t err = cudaMalloc(&device, 64 * sizeof(int))) return err;
  plugin_kernel<<<1, 64>>>(device);
  cudaError_t err = cudaGetLastError();
  if (!err) err = cudaMemcpy(out, device, 64 * sizeof(int), cudaMemcpyDeviceToHost);
  cudaFree(device);
  return err;
}

extern "C" int plugin_add_to_table() {
  plugin_bump<<<1, 64>>>();
  return cudaDeviceSynchronize();
}
