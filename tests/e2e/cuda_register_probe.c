/* Without arguments: linked with libdevdl_test_cuda_second.so (which needs
 * libdevdl_test_cuda_first.so), prints what the second library's constructor saw of the first's,
 * which scanned the process with devdl, and, where LD_PRELOAD names tests/data/preloaded_*.c's
 * libraries, how many times their constructors had run when the first's registration returned,
 * and at main. With a library's path: opens it with dlopen (its
 * constructors register its CUDA objects) and prints the images devdl then has, a line each:
 * "FILE INDEX FORMAT SYMBOLS global|local". */
#include <devdl.h>

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

extern int devdl_test_second_saw;
extern int devdl_test_first_saw_tool, devdl_test_first_saw_carrier;

static int print(const devdl_image_info *info, void *data) {
  (void)data;
  const char *name = strrchr(info->file, '/');
  printf("%s %u %s %zu %s\n", name ? name + 1 : "(executable)", info->index, info->format, info->symbols,
         info->global ? "global" : "local");
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    printf("the second library's constructor saw the first's finished: %d\n", devdl_test_second_saw);
    const int *tool = (const int *)dlsym(RTLD_DEFAULT, "devdl_test_tool_initialized");
    const int *carrier = (const int *)dlsym(RTLD_DEFAULT, "devdl_test_carrier_initialized");
    if (tool && carrier)
      printf("the preloaded tool's and carrier's constructors had run %d and %d times when the first library's "
             "registration returned, %d and %d at main\n",
             devdl_test_first_saw_tool, devdl_test_first_saw_carrier, *tool, *carrier);
    return 0;
  }
  if (!dlopen(argv[1], RTLD_NOW | RTLD_LOCAL)) {
    printf("dlopen: %s\n", dlerror());
    return 1;
  }
  return device_dliterate(print, NULL);
}
