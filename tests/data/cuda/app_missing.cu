// An application whose kernel calls a function nothing defines, under a name devdl takes for the
// toolchain's (the `__` prefix: no import of the image's), so that the plan leaves it to the
// driver's linker, which refuses the program.
extern "C" __device__ int __devdl_test_missing(int x);
extern "C" __global__ void MissingKernel(int *out) { out[threadIdx.x] = __devdl_test_missing(threadIdx.x); }
