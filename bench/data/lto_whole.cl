// bench_lto's first case in OpenCL C as one source file: the limit.
#include "lto_lib.cl"
#include "lto_app.cl"
