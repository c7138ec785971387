// The seed's application: a kernel that calls the library's LibDeviceFunc.
int LibDeviceFunc(int x);

kernel void AppKernel(global int *out) {
  size_t i = get_global_id(0);
  out[i] = LibDeviceFunc((int)i);
}
