// A library whose state is a variable it keeps to itself (static): one instance on each device,
// as of an exported variable, whichever program uses it first (issue 51).
#include "device.h"

STATIC_VARIABLE int Count = 5;
DEVICE void BumpCount(void) { Count += 1; }
DEVICE int ReadCount(void) { return Count; }
// Its own kernels: Count set to 100 by the first work-item; Count read.
KERNEL SetCount(GLOBAL int *out) { int i = THREAD_ID; if (i == 0) Count = 100; out[i] = i; }
KERNEL LibReadCount(GLOBAL int *out) { int i = THREAD_ID; out[i] = Count + i; }
