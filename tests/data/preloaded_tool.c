/* A library standing for a tool that injects itself into programs with LD_PRELOAD, as
 * compute-sanitizer does, and must be initialized before CUDA starts: a library's registration
 * runs its constructor before its own turn. Counts its constructor's runs. */
int devdl_test_tool_initialized = 0;

__attribute__((constructor)) static void initialize(void) { ++devdl_test_tool_initialized; }
