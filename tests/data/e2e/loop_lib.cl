// A library function with a loop that branches in its body. clang-15 -O1 marks the loop not to be
// unrolled, and llvm-spirv-15 then lays out the exit block it adds before the latch that dominates
// it: a module valid but for the order of its blocks, which devdl puts in order as it reads it.
#include "device.h"

DEVICE void LoopClearOdd(GLOBAL int *a, int n) {
  for (int i = 0; i < n; i++)
    if (a[i] & 1) a[i] = 0;
}
