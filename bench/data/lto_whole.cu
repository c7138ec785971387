// bench_lto's first case as one source file compiled whole by nvcc: the limit.
#include "lto_lib.cu"
#include "lto_app.cu"
