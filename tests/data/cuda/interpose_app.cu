// Answer from interpose_first, Other from interpose_other: 2 * 100 + i + 10.
extern "C" __device__ int Answer();
extern "C" __device__ int Other(int x);
extern "C" __global__ void InterposeKernel(int *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = Answer() * 100 + Other(i);
}
