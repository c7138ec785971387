// A diamond: diamond_top imports Left and Right, which both import Base.
int DiamondLeft(int x);
int DiamondRight(int x);
kernel void DiamondKernel(global int *out) {
  int i = (int)get_global_id(0);
  out[i] = DiamondLeft(i) + DiamondRight(i);
}
