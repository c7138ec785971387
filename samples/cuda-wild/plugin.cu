// A plugin linked with the static library of counter.cu: its kernel bumps the counter. One source,
// built as each plugin with PLUGIN (a, b) naming its kernel and entry point apart.
#define DEVDL_PASTE(head, name, tail) head##name##tail
#define DEVDL_NAMED(head, name, tail) DEVDL_PASTE(head, name, tail)
#define PLUGIN_KERNEL DEVDL_NAMED(plugin_, PLUGIN, _kernel)
#define PLUGIN_BUMP DEVDL_NAMED(plugin_, PLUGIN, _bump)

__device__ int counter_bump();

__global__ void PLUGIN_KERNEL(int *out) { *out = counter_bump(); }

extern "C" int PLUGIN_BUMP(int *value) {
  int *out = nullptr;
  cudaError_t err = cudaMalloc(&out, sizeof *out);
  if (!err) {
    PLUGIN_KERNEL<<<1, 1>>>(out);
    err = cudaGetLastError();
  }
  if (!err) err = cudaMemcpy(value, out, sizeof *value, cudaMemcpyDeviceToHost);
  cudaFree(out);
  return err;
}
