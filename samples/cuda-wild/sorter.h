// libcudasorter.so: what a library built on Thrust and CUB exports to other libraries' device code.
#pragma once

__device__ int scaled(int x);                     // 3 * x, called from other libraries' kernels
__global__ void fill_scaled(int *out, int n);    // launched from other libraries' kernels
extern __managed__ int sorter_calls;              // how many times sorter_sort_and_sum ran

// Sorts `n` ints in device memory with Thrust and sums them with CUB: 0 or a cudaError_t.
extern "C" int sorter_sort_and_sum(int *values, int n, long long *sum);
