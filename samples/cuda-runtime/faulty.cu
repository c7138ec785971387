// A library whose kernel reads libcudamath's table and writes past the end of its buffer, built
// with -lineinfo: compute-sanitizer and cuda-gdb name the kernel and this file's line in the
// program devdl linked for it, whether it is registered as the program starts (linked to
// cuda-runtime-faulty-program) or opened after main (by cuda-runtime-plugin-host).
#include "cudamath.h"

__global__ void faulty_kernel(int *out) {
  out[threadIdx.x + 64] = table[threadIdx.x];  // out holds 64 ints: every write is past its end
}

extern "C" int plugin_run(int *) {
  int *device = nullptr;
  if (cudaError_t err = cudaMalloc(&device, 64 * sizeof(int))) return err;
  faulty_kernel<<<1, 64>>>(device);
  cudaError_t err = cudaGetLastError();
  if (!err) err = cudaDeviceSynchronize();
  cudaFree(device);
  return err;
}
