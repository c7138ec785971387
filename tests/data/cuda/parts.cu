// A library whose kernels a link may compile in parts, and those it must keep together
// (NvJitLinkParts.*, Cuda.ProgramInParts): two reach one variable, two take one function's
// address, two have names of which one begins with the other; the rest share only code.
#include <cstdint>

__device__ int Shared = 3;

extern "C" __device__ __noinline__ int Twice(int x) { return 2 * x; }
// Pure code, reached by kernels of different parts: each part compiles its own copy.
__device__ __noinline__ int Mix(int x) { return x * x + 1; }
// Shared reached through a call.
__device__ __noinline__ int SharedPlus(int x) { return Shared + x; }

extern "C" __global__ void BumpShared(int *out) {
  const int i = threadIdx.x;
  if (i == 0) atomicAdd(&Shared, 100);
  out[i] = Mix(i);
}
extern "C" __global__ void ReadShared(int *out) { out[threadIdx.x] = SharedPlus(threadIdx.x); }

// The address of Twice, as a number, and Twice called through it: equal in both kernels only
// where the program has one Twice.
__device__ int ThroughAddress(int x) {
  int (*volatile f)(int) = Twice;
  return static_cast<int>(reinterpret_cast<uintptr_t>(f) & 0xffff) * 1000 + f(x);
}
extern "C" __global__ void TwiceAddress(int *out) { out[threadIdx.x] = ThroughAddress(threadIdx.x); }
extern "C" __global__ void AddressOfTwice(int *out) { out[threadIdx.x] = ThroughAddress(threadIdx.x); }

extern "C" __global__ void Negate(int *out) { out[threadIdx.x] = -Mix(threadIdx.x); }
extern "C" __global__ void NegateTwice(int *out) { out[threadIdx.x] = -2 * Mix(threadIdx.x); }
extern "C" __global__ void Square(int *out) { out[threadIdx.x] = threadIdx.x * threadIdx.x; }
