// A plugin whose kernel calls a device function nothing loaded defines: its code cannot be
// linked, and its kernel fails to launch with the CUDA runtime's own error.
__device__ int missing(int x);

__global__ void broken_kernel(int *out) { out[threadIdx.x] = missing(threadIdx.x); }

extern "C" int broken_run() {
  int *device = nullptr;
  if (cudaError_t err = cudaMalloc(&device, 64 * sizeof(int))) return err;
  broken_kernel<<<1, 64>>>(device);
  cudaError_t err = cudaGetLastError();
  cudaFree(device);
  return err;
}
