int CyclePingLeaf(int x);
int CyclePong(int x) { return CyclePingLeaf(x) + 1; }
