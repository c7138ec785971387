// A chain across three images: ChainKernel -> ChainMid -> ChainBase.
extern "C" __device__ int ChainMid(int x);

extern "C" __global__ void ChainKernel(int *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = ChainMid(i);
}
