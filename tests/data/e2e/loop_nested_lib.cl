// A library function with nested loops left early. clang-15 -O1 and llvm-spirv-15 give both loops
// one merge block, which no structured control flow has: devdl drops the merge instructions (in
// a Kernel module they carry only unrolling hints) as it reads the module.
#include "device.h"

STATIC_VARIABLE int kGrid[12] = {5, 8, 13, 2, 7, 11, 4, 9, 6, 1, 12, 3};

DEVICE int LoopFind(int rows, int cols, int x) {
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++)
      if (kGrid[r * cols + c] == x) return r * cols + c;
  return -1;
}
