int ChainBase(int x) { return x + 3; }
