// The application of bench_lto's second case: a kernel calling each of the library's math
// functions in its hot loop.
extern "C" __device__ float MathSin(float x);
extern "C" __device__ float MathCos(float x);
extern "C" __device__ float MathExp(float x);
extern "C" __device__ float MathLog(float x);
extern "C" __device__ float MathSqrt(float x);
extern "C" __device__ float MathTanh(float x);
extern "C" __device__ float MathAtan(float x);
extern "C" __device__ float MathErf(float x);
extern "C" __device__ float MathCbrt(float x);
extern "C" __device__ float MathHypot(float x, float y);
extern "C" __device__ float MathPoly(float x);
extern "C" __device__ float MathClamp(float x);

extern "C" __global__ void LtoMathKernel(float *out, int iterations) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  float x = static_cast<float>(t & 1023) * 1e-3f;
  for (int i = 0; i < iterations; ++i) {
    const float a = MathSin(x) + MathCos(x) * MathExp(x);
    const float b = MathLog(x) * MathSqrt(x) - MathTanh(x);
    const float c = MathAtan(x) + MathErf(x) * MathCbrt(x);
    x = MathClamp(MathPoly(a * 0.25f) + MathHypot(b, c) * 0.125f);
  }
  out[t] = x;
}
