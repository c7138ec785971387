int DiamondBase(int x);
int DiamondLeft(int x) { return DiamondBase(x) + 1; }
