// Images that import from each other (no recursive calls: OpenCL C has none).
int CyclePong(int x);
int CyclePingLeaf(int x) { return 3 * x; }
kernel void CycleKernel(global int *out) { int i = (int)get_global_id(0); out[i] = CyclePong(i); }
