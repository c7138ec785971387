// The function of virtual-function set B: 100 + i.
#include "device.h"

DEVICE int VfShape(int x) { return 100 + x; }
