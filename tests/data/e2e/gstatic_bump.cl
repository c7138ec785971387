// An application that changes gstatic_lib's static Count through the library's function: its
// first work-item adds 1.
#include "device.h"

DEVICE void BumpCount(void);
KERNEL BumpCountKernel(GLOBAL int *out) { int i = THREAD_ID; if (i == 0) BumpCount(); out[i] = i; }
