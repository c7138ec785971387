#include "device.h"

DEVICE int DupValue(void);
KERNEL ValueKernel(GLOBAL int *out) { out[THREAD_ID] = DupValue(); }
