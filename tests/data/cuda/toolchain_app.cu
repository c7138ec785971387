// An application whose kernel launches the library's (toolchain_lib.cu) from the device: the CUDA
// device runtime (libcudadevrt) is linked in by devdl, as nvcc -dlink links it. It uses the rest
// of what the toolchain provides, which no image defines: device printf (vprintf), malloc and
// free, and an extern __shared__ array (the kernel's dynamic shared memory).
#include <cstdio>

extern "C" __global__ void ChildKernel(int *out, int plus);
extern __shared__ int Scratch[];

extern "C" __global__ void ParentKernel(int *out) {
  if (threadIdx.x != 0) return;
  int *cell = static_cast<int *>(malloc(sizeof(int)));
  *cell = 1;
  const int plus = *cell;
  free(cell);
  printf("ParentKernel launches ChildKernel over %u threads\n", blockDim.x);
  ChildKernel<<<1, blockDim.x>>>(out, plus);
}

// Launched with dynamic shared memory: n ints.
extern "C" __global__ void ScratchKernel(int *out) {
  Scratch[threadIdx.x] = static_cast<int>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = Scratch[blockDim.x - 1 - threadIdx.x];
}
