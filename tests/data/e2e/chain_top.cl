// A chain of images: chain_top -> chain_mid -> chain_base.
int ChainMid(int x);
kernel void ChainKernel(global int *out) { int i = (int)get_global_id(0); out[i] = ChainMid(i) + 1; }
