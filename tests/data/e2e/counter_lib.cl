// A library with a device variable (the device global of the host object registered as
// uid_counter) and a kernel of its own that reads it.
#include "device.h"

VARIABLE int SharedCounter = 3;
KERNEL LibCounterKernel(GLOBAL int *out) { int i = THREAD_ID; out[i] = SharedCounter + i; }
