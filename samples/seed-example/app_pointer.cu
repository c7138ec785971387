// A device function pointer taken in this image to a function of another image, and called
// through: both must be linked into one module, which devdl's link plan does.
extern "C" __device__ int LibDeviceFunc(int x);

extern "C" __device__ int (*LibPointer)(int) = LibDeviceFunc;

extern "C" __global__ void PointerKernel(int *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = LibPointer(i);
}
