// Reads and writes the seed library's device global LibCounter: each work-item reports
// LibCounter + its index, then work-item 0 adds 100 to it.
extern "C" __device__ int LibCounter;

extern "C" __global__ void CounterKernel(int *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = LibCounter + i;
  __syncthreads();
  if (i == 0) LibCounter += 100;
}
