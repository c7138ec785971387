// bench_lto's variable case as one source file compiled whole by nvcc: the limit.
#include "var_lib.cu"
#include "var_app.cu"
