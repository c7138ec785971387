// The seed's library with a lot more code beside it (benchmarks: a program of realistic size
// rather than the seed's few hundred bytes of SASS). LibDeviceFunc is the seed's; the kernels
// are work the library would carry for other callers.
extern "C" __device__ int LibDeviceFunc(int x) { return 2 * x; }

template <int N>
__device__ __noinline__ float Polish(float x, const float *c) {
#pragma unroll
  for (int k = 0; k < 64; ++k) x = fmaf(x, c[(k * N) & 63], __sinf(x + k * N));
  return x;
}

#define DEVDL_LARGE_KERNEL(N)                                                    \
  extern "C" __global__ void LargeKernel##N(float *data, const float *c) {      \
    int i = blockIdx.x * blockDim.x + threadIdx.x;                               \
    data[i] = Polish<N>(data[i], c) + Polish<N + 1>(data[i] * 0.5f, c);          \
  }
#define DEVDL_LARGE_KERNELS_8(B) DEVDL_LARGE_KERNEL(B##0) DEVDL_LARGE_KERNEL(B##1) DEVDL_LARGE_KERNEL(B##2) \
  DEVDL_LARGE_KERNEL(B##3) DEVDL_LARGE_KERNEL(B##4) DEVDL_LARGE_KERNEL(B##5) DEVDL_LARGE_KERNEL(B##6) DEVDL_LARGE_KERNEL(B##7)
DEVDL_LARGE_KERNELS_8(1) DEVDL_LARGE_KERNELS_8(2) DEVDL_LARGE_KERNELS_8(3) DEVDL_LARGE_KERNELS_8(4)
DEVDL_LARGE_KERNELS_8(5) DEVDL_LARGE_KERNELS_8(6) DEVDL_LARGE_KERNELS_8(7) DEVDL_LARGE_KERNELS_8(8)
DEVDL_LARGE_KERNELS_8(9) DEVDL_LARGE_KERNELS_8(10) DEVDL_LARGE_KERNELS_8(11) DEVDL_LARGE_KERNELS_8(12)
