// A static library of device code that two plugins each link in (the case of CMSSW's plugins and
// the libraries they share): its variable and its function are in both.
__device__ int counter_value = 0;

__device__ int counter_bump() { return atomicAdd(&counter_value, 1) + 1; }
