// The library of bench_lto's variable case (issue 51): a device variable of one slot for each
// thread, stepped by a function an application calls in its hot loop, and a kernel of its own
// (linked first, it holds the variable's instance, which the application's program then reaches).
extern "C" {
__device__ float Slots[262144];
}
extern "C" __device__ float SlotStep(int t, int i) {
  const float x = Slots[t] * 0.999f + static_cast<float>(i & 7) * 1e-4f;
  Slots[t] = x;
  return x;
}
extern "C" __global__ void SlotsRead(float *out, int) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  out[t] = Slots[t];
}
