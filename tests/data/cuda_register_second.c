/* A host library loaded with cuda_register_first.c's, which needs it (DT_NEEDED): the host loader
 * runs its constructor after that one's. It imports device_dlregister_cuda as a library linked
 * with devdl's CUDA registration object does, so devdl reads its file while scanning. */
#include <devdl_cuda.h>

extern int devdl_test_first_done;

int devdl_test_second_saw = -1;
int (*devdl_test_second_registers)(devdl_cuda_objects *) = device_dlregister_cuda;

__attribute__((constructor)) static void record(void) { devdl_test_second_saw = devdl_test_first_done; }
