int DiamondBase(int x);
int DiamondRight(int x) { return DiamondBase(x) + 2; }
