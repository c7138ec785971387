// An application that reads gstate_lib's State through the library's function and as a variable
// it imports: State + i each.
#include "device.h"

DEVICE int ReadState(void);
EXTERN_VARIABLE int State;
KERNEL ReadKernel(GLOBAL int *out) { int i = THREAD_ID; out[i] = ReadState() + i; }
KERNEL ReadDirect(GLOBAL int *out) { int i = THREAD_ID; out[i] = State + i; }
