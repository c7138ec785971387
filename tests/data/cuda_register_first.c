/* A host library whose constructor registers CUDA objects with devdl, as devdl-pack
 * --cuda-register's object does, without having any: devdl scans the process from inside the
 * constructor and says so. Records that its constructor finished, and what its registration found
 * of the preloaded libraries' constructors (tests/data/preloaded_*.c) once it returned. */
#include <devdl_cuda.h>

#include <dlfcn.h>
#include <stdio.h>

int devdl_test_first_done = 0;
int devdl_test_first_saw_tool = -1;
int devdl_test_first_saw_carrier = -1;

static int counted(const char *name) {
  const int *count = (const int *)dlsym(RTLD_DEFAULT, name);
  return count ? *count : -1;
}

static void *load(void *context, const void *image, size_t size, const char *anchor) {
  (void)context, (void)image, (void)size, (void)anchor;
  return NULL;
}

static devdl_cuda_objects objects = {sizeof objects, &objects, load, NULL};

__attribute__((constructor)) static void registerObjects(void) {
  if (device_dlregister_cuda(&objects) != 0) fprintf(stderr, "%s\n", device_dlerror());
  devdl_test_first_saw_tool = counted("devdl_test_tool_initialized");
  devdl_test_first_saw_carrier = counted("devdl_test_carrier_initialized");
  devdl_test_first_done = 1;
}
