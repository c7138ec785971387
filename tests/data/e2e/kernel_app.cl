// An application whose kernel calls the library's function: the library's code is in its program.
#include "device.h"

DEVICE int LibTwice(int x);
KERNEL UserKernel(GLOBAL int *out) { int i = THREAD_ID; out[i] = LibTwice(i) + 1; }
