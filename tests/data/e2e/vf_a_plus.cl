// Another function of virtual-function set A, in another file.
#include "device.h"

DEVICE int VfPlusTen(int x) { return x + 10; }
