// An application that changes gstate_lib's State through the library's function: its first
// work-item adds 1.
#include "device.h"

DEVICE void BumpState(void);
KERNEL BumpKernel(GLOBAL int *out) { int i = THREAD_ID; if (i == 0) BumpState(); out[i] = i; }
