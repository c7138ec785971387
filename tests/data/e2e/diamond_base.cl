int DiamondBase(int x) { return 10 * x; }
