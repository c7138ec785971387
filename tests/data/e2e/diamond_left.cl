#include "device.h"

DEVICE int DiamondBase(int x);
DEVICE int DiamondLeft(int x) { return DiamondBase(x) + 1; }
