// The library of bench_lto's second case: a dozen math functions, each a little work of its own.
extern "C" __device__ float MathSin(float x) { return sinf(x); }
extern "C" __device__ float MathCos(float x) { return cosf(x); }
extern "C" __device__ float MathExp(float x) { return expf(-fabsf(x)); }
extern "C" __device__ float MathLog(float x) { return log1pf(fabsf(x)); }
extern "C" __device__ float MathSqrt(float x) { return sqrtf(fabsf(x) + 1.0f); }
extern "C" __device__ float MathTanh(float x) { return tanhf(x); }
extern "C" __device__ float MathAtan(float x) { return atanf(x); }
extern "C" __device__ float MathErf(float x) { return erff(x); }
extern "C" __device__ float MathCbrt(float x) { return cbrtf(x); }
extern "C" __device__ float MathHypot(float x, float y) { return hypotf(x, y); }
extern "C" __device__ float MathPoly(float x) { return ((0.25f * x + 0.5f) * x - 0.125f) * x + 1.0f; }
extern "C" __device__ float MathClamp(float x) { return fminf(fmaxf(x, -4.0f), 4.0f); }
