// The library of bench_lto's second case in OpenCL C: a dozen math functions.
float MathSin(float x) { return sin(x); }
float MathCos(float x) { return cos(x); }
float MathExp(float x) { return exp(-fabs(x)); }
float MathLog(float x) { return log1p(fabs(x)); }
float MathSqrt(float x) { return sqrt(fabs(x) + 1.0f); }
float MathTanh(float x) { return tanh(x); }
float MathAtan(float x) { return atan(x); }
float MathErf(float x) { return erf(x); }
float MathCbrt(float x) { return cbrt(x); }
float MathHypot(float x, float y) { return hypot(x, y); }
float MathPoly(float x) { return ((0.25f * x + 0.5f) * x - 0.125f) * x + 1.0f; }
float MathClamp(float x) { return fmin(fmax(x, -4.0f), 4.0f); }
