/* A preloaded library that carries CUDA objects for devdl (it imports device_dlregister_cuda, as
 * a library linked with devdl's registration object does): its constructor keeps its turn, after
 * the libraries the program needs. Counts its constructor's runs. */
#include <devdl_cuda.h>

int devdl_test_carrier_initialized = 0;
int (*devdl_test_carrier_registers)(devdl_cuda_objects *) = device_dlregister_cuda;

__attribute__((constructor)) static void initialize(void) { ++devdl_test_carrier_initialized; }
