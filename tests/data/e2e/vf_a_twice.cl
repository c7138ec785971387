// A function of virtual-function set A.
#include "device.h"

DEVICE int VfTwice(int x) { return 2 * x; }
