// Defines Level too, which its own Base keeps using (made local), and Offset and Base, which the
// application needs (Offset first: its image comes before interpose_var_first's in the program).
#include "device.h"

VARIABLE int Offset = 1000;
VARIABLE int Level = 1;
DEVICE int Base(int x) { return Level * 100 + x; }
