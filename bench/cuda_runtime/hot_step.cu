// The library of bench_cuda_runtime's program: a small __device__ function, as a library's kernels'
// callees are. Built as a shared library linked at load time by devdl, and as a static library
// device-linked by nvcc, the anchor.
__device__ unsigned hot_step(unsigned x) { return (x ^ (x >> 7)) * 1103515245u + 12345u; }
