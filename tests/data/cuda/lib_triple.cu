// A second definition of the seed library's LibDeviceFunc, which triples: whichever comes
// first in search order is the one the application's kernel calls.
extern "C" __device__ int LibDeviceFunc(int x) { return 3 * x; }
