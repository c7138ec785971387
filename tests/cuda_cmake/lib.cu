// A library of device code: a __device__ function another target's kernel calls.
__device__ int twice(int x) { return 2 * x; }
