// The application of bench_lto's first case: a kernel calling the library in its hot loop.
extern "C" __device__ float LtoScale(float x);
extern "C" __device__ float LtoShift(float x, int i);

extern "C" __global__ void LtoKernel(float *out, int iterations) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  float x = static_cast<float>(t) * 1e-6f;
  for (int i = 0; i < iterations; ++i) x = LtoShift(LtoScale(x), i);
  out[t] = x;
}
