// Offset and Base from interpose_var_other (Base with its own Level, 1), Level from
// interpose_var_first (2).
#include "device.h"

EXTERN_VARIABLE int Offset;
EXTERN_VARIABLE int Level;
DEVICE int Base(int x);
KERNEL LevelKernel(GLOBAL int *out) { int i = THREAD_ID; out[i] = Offset + Base(i) + Level * 10; }
