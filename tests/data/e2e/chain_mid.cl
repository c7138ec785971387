int ChainBase(int x);
int ChainMid(int x) { return ChainBase(x) * 2; }
