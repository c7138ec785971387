// Scale and StaticLevel from static_var_lib (its own Level, 9), Level from interpose_var_first (2).
#include "device.h"

EXTERN_VARIABLE int Scale;
EXTERN_VARIABLE int Level;
DEVICE int StaticLevel(void);
KERNEL StaticKernel(GLOBAL int *out) { int i = THREAD_ID; out[i] = Scale + StaticLevel() * 100 + Level * 10 + i; }
