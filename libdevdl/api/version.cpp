#include "devdl.h"

extern "C" unsigned device_dlversion(void) { return DEVDL_VERSION; }
