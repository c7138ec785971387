// A library kernel another image's kernel launches (dynamic parallelism across images), using
// what the CUDA toolchain provides rather than an image: a __shared__ variable.
__shared__ int ChildTile[32];

extern "C" __global__ void ChildKernel(int *out, int plus) {
  ChildTile[threadIdx.x] = 3 * static_cast<int>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = ChildTile[threadIdx.x] + plus;
}
