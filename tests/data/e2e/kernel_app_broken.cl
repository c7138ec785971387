// Imports the library's function and a function nothing defines: it cannot be linked.
int LibTwice(int x);
int NowhereDefined(int x);
kernel void BrokenKernel(global int *out) { out[0] = LibTwice(NowhereDefined(1)); }
