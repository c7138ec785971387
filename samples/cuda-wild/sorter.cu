// A library built on Thrust and CUB, -rdc, whose device code other libraries use: its
// instantiations of Thrust's and CUB's templates (weak device symbols) are also the program's,
// which instantiates the same ones.
#include "sorter.h"

#include <cub/device/device_reduce.cuh>
#include <thrust/device_ptr.h>
#include <thrust/sort.h>

__managed__ int sorter_calls = 0;

__device__ int scaled(int x) { return 3 * x; }

__global__ void fill_scaled(int *out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = scaled(i);
}

extern "C" int sorter_sort_and_sum(int *values, int n, long long *sum) {
  thrust::sort(thrust::device_ptr<int>(values), thrust::device_ptr<int>(values + n));
  long long *total = nullptr;
  void *scratch = nullptr;
  size_t bytes = 0;
  cudaError_t err = cub::DeviceReduce::Sum(nullptr, bytes, values, total, n);
  if (!err) err = cudaMalloc(&total, sizeof *total);
  if (!err) err = cudaMalloc(&scratch, bytes);
  if (!err) err = cub::DeviceReduce::Sum(scratch, bytes, values, total, n);
  if (!err) err = cudaMemcpy(sum, total, sizeof *sum, cudaMemcpyDeviceToHost);
  cudaFree(scratch);
  cudaFree(total);
  if (!err) ++sorter_calls;  // managed: written by the host
  return err;
}
