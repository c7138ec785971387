// The application of bench_lto's second case in OpenCL C: a kernel calling each of the library's
// math functions in its hot loop.
float MathSin(float x);
float MathCos(float x);
float MathExp(float x);
float MathLog(float x);
float MathSqrt(float x);
float MathTanh(float x);
float MathAtan(float x);
float MathErf(float x);
float MathCbrt(float x);
float MathHypot(float x, float y);
float MathPoly(float x);
float MathClamp(float x);

kernel void LtoMathKernel(global float *out, int iterations) {
  const int t = (int)get_global_id(0);
  float x = (float)(t & 1023) * 1e-3f;
  for (int i = 0; i < iterations; ++i) {
    const float a = MathSin(x) + MathCos(x) * MathExp(x);
    const float b = MathLog(x) * MathSqrt(x) - MathTanh(x);
    const float c = MathAtan(x) + MathErf(x) * MathCbrt(x);
    x = MathClamp(MathPoly(a * 0.25f) + MathHypot(b, c) * 0.125f);
  }
  out[t] = x;
}
