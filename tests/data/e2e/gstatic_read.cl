// An application that reads gstatic_lib's static Count through the library's function:
// Count + i each.
#include "device.h"

DEVICE int ReadCount(void);
KERNEL ReadCountKernel(GLOBAL int *out) { int i = THREAD_ID; out[i] = ReadCount() + i; }
