// The library of bench_lto's first case in OpenCL C: two small functions an application calls in
// its hot loop, compiled apart from it (issue 18).
float LtoScale(float x) { return x * 0.999f + 0.001f; }
float LtoShift(float x, int i) { return x + (float)(i & 7) * 1e-4f; }
