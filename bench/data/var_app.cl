// The application of bench_lto's variable case in OpenCL C: a kernel stepping the library's
// variable in its hot loop, through the library's function.
float SlotStep(int t, int i);

kernel void SlotsKernel(global float *out, int iterations) {
  const int t = (int)get_global_id(0);
  float x = 0;
  for (int i = 0; i < iterations; ++i) x += SlotStep(t, i);
  out[t] = x;
}
