// The library of bench_lto's variable case in OpenCL C (issue 51): a device variable of one slot
// for each thread, stepped by a function an application calls in its hot loop, and a kernel of
// its own (linked first, it holds the variable's instance, which the application's program then
// reaches).
global float Slots[262144];
float SlotStep(int t, int i) {
  const float x = Slots[t] * 0.999f + (float)(i & 7) * 1e-4f;
  Slots[t] = x;
  return x;
}
kernel void SlotsRead(global float *out, int iterations) {
  const int t = (int)get_global_id(0);
  out[t] = Slots[t];
}
