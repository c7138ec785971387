// An application whose kernel reads the seed library's variable LibCounter (lib.cl).
extern global int LibCounter;
kernel void CounterKernel(global int *out) { int i = (int)get_global_id(0); out[i] = LibCounter + i; }
