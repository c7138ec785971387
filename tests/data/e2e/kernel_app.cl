// An application whose kernel calls the library's function: the library's code is in its program.
int LibTwice(int x);
kernel void UserKernel(global int *out) { int i = (int)get_global_id(0); out[i] = LibTwice(i) + 1; }
