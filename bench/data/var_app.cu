// The application of bench_lto's variable case: a kernel stepping the library's variable in its
// hot loop, through the library's function.
extern "C" __device__ float SlotStep(int t, int i);

extern "C" __global__ void SlotsKernel(float *out, int iterations) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  float x = 0;
  for (int i = 0; i < iterations; ++i) x += SlotStep(t, i);
  out[t] = x;
}
