// The application of bench_lto's first case in OpenCL C: a kernel calling the library in its hot loop.
float LtoScale(float x);
float LtoShift(float x, int i);

kernel void LtoKernel(global float *out, int iterations) {
  const int t = (int)get_global_id(0);
  float x = (float)t * 1e-6f;
  for (int i = 0; i < iterations; ++i) x = LtoShift(LtoScale(x), i);
  out[t] = x;
}
