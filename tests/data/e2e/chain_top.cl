// A chain of images: chain_top -> chain_mid -> chain_base.
#include "device.h"

DEVICE int ChainMid(int x);
KERNEL ChainKernel(GLOBAL int *out) { int i = THREAD_ID; out[i] = ChainMid(i) + 1; }
