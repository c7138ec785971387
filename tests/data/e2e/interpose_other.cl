// Defines Answer too, and Other, which the application needs: its Answer is made local.
#include "device.h"

DEVICE int Answer(void) { return 1; }
DEVICE int Other(int x) { return x + 10; }
