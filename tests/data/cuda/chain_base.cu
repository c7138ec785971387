extern "C" __device__ int ChainBase(int x) { return 10 * x; }
