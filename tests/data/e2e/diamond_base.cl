#include "device.h"

DEVICE int DiamondBase(int x) { return 10 * x; }
