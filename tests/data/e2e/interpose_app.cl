// Answer from interpose_first, Other from interpose_other: 2 * 100 + i + 10.
#include "device.h"

DEVICE int Answer(void);
DEVICE int Other(int x);
KERNEL InterposeKernel(GLOBAL int *out) { int i = THREAD_ID; out[i] = Answer() * 100 + Other(i); }
