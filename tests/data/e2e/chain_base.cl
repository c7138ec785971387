#include "device.h"

DEVICE int ChainBase(int x) { return x + 3; }
