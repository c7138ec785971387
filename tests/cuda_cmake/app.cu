// A kernel calling the library's __device__ function across the shared library's boundary
// (devdl links it as the program loads). Without a GPU the launch fails, and the program says so.
#include <cstdio>

__device__ int twice(int x);
__global__ void apply(int *out) { out[threadIdx.x] = twice(static_cast<int>(threadIdx.x)); }

int main() {
  int *out = nullptr;
  cudaError_t err = cudaMalloc(&out, 8 * sizeof(int));
  if (err == cudaSuccess) {
    apply<<<1, 8>>>(out);
    err = cudaDeviceSynchronize();
  }
  int host[8] = {};
  if (err == cudaSuccess) err = cudaMemcpy(host, out, sizeof host, cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) {
    std::printf("main ran: %s\n", cudaGetErrorName(err));
    return 0;
  }
  for (int v : host) std::printf("%d ", v);
  std::printf("\n");
  return 0;
}
