#include "device.h"

DEVICE int ChainBase(int x);
DEVICE int ChainMid(int x) { return ChainBase(x) * 2; }
