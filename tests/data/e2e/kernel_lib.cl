// A library with a kernel of its own and a function an application's kernel calls.
#include "device.h"

DEVICE int LibTwice(int x) { return 2 * x; }
KERNEL LibKernel(GLOBAL int *out) { int i = THREAD_ID; out[i] = LibTwice(i) + 100; }
