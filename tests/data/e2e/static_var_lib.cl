// A library with a variable of its own named Level (static; written by SetStaticLevel, so that it
// stays a variable), beside interpose_var_first's exported Level, and Scale and StaticLevel, which
// the application needs (Scale first: this image comes before interpose_var_first's in the
// program).
#include "device.h"

VARIABLE int Scale = 1000;
STATIC_VARIABLE int Level = 9;
DEVICE int StaticLevel(void) { return Level; }
DEVICE void SetStaticLevel(int level) { Level = level; }
