// Creates objects of virtual-function set B: its program gets B's functions where the device
// has what they need, else B's dummy image.
#include "device.h"

DEVICE int VfShape(int x);
KERNEL VfMakeKernel(GLOBAL int *out) { int i = THREAD_ID; out[i] = VfShape(i); }
