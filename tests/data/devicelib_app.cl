// An application of SYCL's fallback math library (libsycl-fallback-cmath.spv, which
// scripts/setup-debian.sh unpacks from the registry's SYCL runtime): its functions imported by
// name, as DPC++'s wrappers call them, and defined in that library alone.
float __devicelib_expf(float x);
float __devicelib_sinf(float x);
float __devicelib_hypotf(float x, float y);

// out[i] = 1000 * (exp(i / 8) + sin(i / 8) + hypot(i / 8, 1)), rounded down.
kernel void DevicelibKernel(global int *out) {
  const size_t i = get_global_id(0);
  const float x = (float)i / 8.0f;
  out[i] = (int)(1000.0f * (__devicelib_expf(x) + __devicelib_sinf(x) + __devicelib_hypotf(x, 1.0f)));
}
