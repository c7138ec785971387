// Interposition of a variable: the first Level in search order, which the application uses.
#include "device.h"

VARIABLE int Level = 2;
