// A variable whose initializer is another's address, which the device's loader fills in, and a
// kernel that reads the other through it and by name (llvm-spirv-15 lists a variable among a
// kernel's interface only where the kernel names it, which SPIR-V 1.4 asks of every one it uses).
#include "device.h"

VARIABLE int Target = 5;
VARIABLE int *Pointer = &Target;
KERNEL PointerKernel(GLOBAL int *out) { int i = THREAD_ID; out[i] = *Pointer + Target + i; }
