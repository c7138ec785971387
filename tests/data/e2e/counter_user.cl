// An application whose kernel reads the library's SharedCounter: 2 * SharedCounter + i.
#include "device.h"

EXTERN_VARIABLE int SharedCounter;
KERNEL UserCounterKernel(GLOBAL int *out) { int i = THREAD_ID; out[i] = 2 * SharedCounter + i; }
