// The library of bench_lto's first case: two small functions an application calls in its hot
// loop, compiled apart from it (issue 18).
extern "C" __device__ float LtoScale(float x) { return x * 0.999f + 0.001f; }
extern "C" __device__ float LtoShift(float x, int i) { return x + static_cast<float>(i & 7) * 1e-4f; }
