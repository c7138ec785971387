// Two definitions of DupValue: the first in search order wins.
#include "device.h"

DEVICE int DupValue(void) { return 1; }
