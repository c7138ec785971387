// bench_lto's second case in OpenCL C as one source file: the limit.
#include "lto_math_lib.cl"
#include "lto_math_app.cl"
