// An application whose kernel calls the libraries' functions with loops (loop_lib.cl,
// loop_nested_lib.cl).
#include "device.h"

DEVICE void LoopClearOdd(GLOBAL int *a, int n);
DEVICE int LoopFind(int rows, int cols, int x);
KERNEL LoopKernel(GLOBAL int *out) {
  int i = THREAD_ID;
  out[i] = 3 * i;
  LoopClearOdd(out + i, 1);
  out[i] = 100 * out[i] + LoopFind(3, 4, i + 1);
}
