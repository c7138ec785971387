// The seed's library (LibDeviceFunc) with one small kernel beside it (kernels.h).
#define DEVDL_KERNEL extern "C" __global__
#define DEVDL_GLOBAL
#define DEVDL_INDEX (blockIdx.x * blockDim.x + threadIdx.x)
#include "../kernels.h"

extern "C" __device__ int LibDeviceFunc(int x) { return 2 * x; }

DEVDL_SMALL(000)
