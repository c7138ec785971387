// An application whose kernel reads the seed library's variable LibCounter (lib.cl, lib.cu).
#include "device.h"

EXTERN_VARIABLE int LibCounter;
KERNEL CounterKernel(GLOBAL int *out) { int i = THREAD_ID; out[i] = LibCounter + i; }
