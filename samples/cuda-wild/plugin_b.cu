// A plugin linked with the static library of counter.cu: its kernel bumps the counter.
__device__ int counter_bump();

__global__ void plugin_b_kernel(int *out) { *out = counter_bump(); }

extern "C" int plugin_b_bump(int *value) {
  int *out = nullptr;
  cudaError_t err = cudaMalloc(&out, sizeof *out);
  if (!err) {
    plugin_b_kernel<<<1, 1>>>(out);
    err = cudaGetLastError();
  }
  if (!err) err = cudaMemcpy(value, out, sizeof *value, cudaMemcpyDeviceToHost);
  cudaFree(out);
  return err;
}
