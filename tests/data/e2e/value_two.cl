int DupValue(void) { return 2; }
