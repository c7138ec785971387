// A diamond: diamond_top imports Left and Right, which both import Base.
#include "device.h"

DEVICE int DiamondLeft(int x);
DEVICE int DiamondRight(int x);
KERNEL DiamondKernel(GLOBAL int *out) {
  int i = THREAD_ID;
  out[i] = DiamondLeft(i) + DiamondRight(i);
}
