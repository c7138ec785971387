// Imports the library's function and a function nothing defines: it cannot be linked.
#include "device.h"

DEVICE int LibTwice(int x);
DEVICE int NowhereDefined(int x);
KERNEL BrokenKernel(GLOBAL int *out) { out[0] = LibTwice(NowhereDefined(1)); }
