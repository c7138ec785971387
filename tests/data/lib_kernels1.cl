// The seed's library (LibDeviceFunc) with one small kernel beside it (kernels.h).
#define DEVDL_KERNEL kernel
#define DEVDL_GLOBAL global
#define DEVDL_INDEX get_global_id(0)
#include "kernels.h"

int LibDeviceFunc(int x) { return 2 * x; }

DEVDL_SMALL(000)
