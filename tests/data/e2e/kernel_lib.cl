// A library with a kernel of its own and a function an application's kernel calls.
int LibTwice(int x) { return 2 * x; }
kernel void LibKernel(global int *out) { int i = (int)get_global_id(0); out[i] = LibTwice(i) + 100; }
