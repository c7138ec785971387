// Calls the functions of virtual-function set A (seed 003), which two files hold: VfTwice in
// vf_a_twice, VfPlusTen in vf_a_plus. 2i + i + 10.
#include "device.h"

DEVICE int VfTwice(int x);
DEVICE int VfPlusTen(int x);
KERNEL VfCallKernel(GLOBAL int *out) { int i = THREAD_ID; out[i] = VfTwice(i) + VfPlusTen(i); }
