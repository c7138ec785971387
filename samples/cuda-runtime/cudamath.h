// libcudamath: a __device__ function and a __device__ table its init kernel fills, for the
// kernels of other shared libraries.
#pragma once

extern __device__ int table[64];
__device__ int mathf(int x);

// Fills table[i] = i * i on the device; 0, or the CUDA runtime's error.
int math_fill();
