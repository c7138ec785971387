// The seed's application in CUDA: a kernel that calls the library's LibDeviceFunc.
extern "C" __device__ int LibDeviceFunc(int x);

extern "C" __global__ void AppKernel(int *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = LibDeviceFunc(i);
}
