// Images that import from each other (no recursive calls: OpenCL C has none).
#include "device.h"

DEVICE int CyclePong(int x);
DEVICE int CyclePingLeaf(int x) { return 3 * x; }
KERNEL CycleKernel(GLOBAL int *out) { int i = THREAD_ID; out[i] = CyclePong(i); }
