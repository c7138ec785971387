#include "device.h"

DEVICE int DupValue(void) { return 2; }
