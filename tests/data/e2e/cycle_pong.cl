#include "device.h"

DEVICE int CyclePingLeaf(int x);
DEVICE int CyclePong(int x) { return CyclePingLeaf(x) + 1; }
