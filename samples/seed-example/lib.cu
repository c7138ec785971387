// The seed's library in CUDA: exports LibDeviceFunc and a device global.
extern "C" __device__ int LibDeviceFunc(int x) { return 2 * x; }

extern "C" __device__ int LibCounter = 7;
