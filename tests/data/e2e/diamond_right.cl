#include "device.h"

DEVICE int DiamondBase(int x);
DEVICE int DiamondRight(int x) { return DiamondBase(x) + 2; }
