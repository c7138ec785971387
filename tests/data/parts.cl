// A library whose kernels can be linked in parts (issue 41), as data/cuda/parts.cu is for CUDA:
// the two kernels that share a variable go together, the others may go apart, a kernel calling
// another as a function too (clang inlines it).
global int Shared = 7;

kernel void BumpShared(global int *out) { out[0] = ++Shared; }
kernel void ReadShared(global int *out) { out[get_global_id(0)] = Shared; }
kernel void Square(global int *out) {
  int i = (int)get_global_id(0);
  out[i] = i * i;
}
kernel void Negate(global int *out) {
  int i = (int)get_global_id(0);
  out[i] = -i;
}
kernel void NegateTwice(global int *out) {
  Negate(out);
  out[get_global_id(0)] *= 2;
}
