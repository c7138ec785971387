// bench_lto's second case as one source file compiled whole by nvcc: the limit.
#include "lto_math_lib.cu"
#include "lto_math_app.cu"
