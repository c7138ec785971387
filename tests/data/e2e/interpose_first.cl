// Interposition by symbol: the first Answer in search order, which the application uses.
#include "device.h"

DEVICE int Answer(void) { return 2; }
