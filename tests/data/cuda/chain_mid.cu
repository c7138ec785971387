extern "C" __device__ int ChainBase(int x);

extern "C" __device__ int ChainMid(int x) { return ChainBase(x) + 1; }
