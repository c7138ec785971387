// An application of four of SYCL's device libraries (intel-sycl-rt 2025.3.3, which
// scripts/setup-debian.sh unpacks) that Debian's SPIRV-Tools cannot vouch for:
// libsycl-fallback-imf.spv and libsycl-fallback-imf-fp64.spv (SPV_INTEL_memory_access_aliasing),
// and libsycl-bfloat16.spv or libsycl-native-bfloat16.spv (the bfloat16 conversion capability).
// Their functions as DPC++'s wrappers call them: C names, bfloat16 by reference.
int __devicelib_imf_abs(int x);
uint __devicelib_imf_brev(uint x);
float __devicelib_imf_fmaf(float a, float b, float c);
int __devicelib_imf_float2int_rn(float x);
double __devicelib_imf_fma(double a, double b, double c);
int __devicelib_imf_double2int_rn(double x);
ushort __devicelib_ConvertFToBF16INTEL(const float *x);
float __devicelib_ConvertBF16ToFINTEL(const ushort *x);

// Six results for each i, one a work-item (j = 6 i + k gives the k-th), checked against the
// host's: x is exact in float (an integer below 2^24 scaled by 2^-10), and needs rounding in
// bfloat16.
kernel void SyclLibsKernel(global int *out) {
  const int j = get_global_id(0), i = j / 6, k = j - 6 * i;
  const float x = (float)(i * 1000003 - 5000000) * (1.0f / 1024.0f);
  const ushort b = __devicelib_ConvertFToBF16INTEL(&x);
  const float back = __devicelib_ConvertBF16ToFINTEL(&b);
  int result = 0;
  if (k == 0) result = __devicelib_imf_abs(i - 5);
  if (k == 1) result = (int)__devicelib_imf_brev((uint)i);
  if (k == 2) result = __devicelib_imf_float2int_rn(__devicelib_imf_fmaf(x, 2.0f, 0.5f));
  if (k == 3) result = __devicelib_imf_double2int_rn(__devicelib_imf_fma((double)x, 3.0, 0.25));
  if (k == 4) result = (int)b;
  if (k == 5) result = (int)(back * 1000.0f);
  out[j] = result;
}
