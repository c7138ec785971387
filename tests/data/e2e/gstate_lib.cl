// A library whose variable State is its state: one instance on each device, whichever program
// uses it first, its own kernels' or an application's (issue 51).
#include "device.h"

VARIABLE int State = 5;
DEVICE void BumpState(void) { State += 1; }
DEVICE int ReadState(void) { return State; }
// Its own kernels: State set to 100 by the first work-item; State read.
KERNEL SetState(GLOBAL int *out) { int i = THREAD_ID; if (i == 0) State = 100; out[i] = i; }
KERNEL LibReadState(GLOBAL int *out) { int i = THREAD_ID; out[i] = State + i; }
