// Two definitions of DupValue: the first in search order wins.
int DupValue(void) { return 1; }
