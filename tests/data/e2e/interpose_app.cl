// Answer from interpose_first, Other from interpose_other: 2 * 100 + i + 10.
int Answer(void);
int Other(int x);
kernel void InterposeKernel(global int *out) { int i = (int)get_global_id(0); out[i] = Answer() * 100 + Other(i); }
