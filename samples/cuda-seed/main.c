/* The seeds' example in CUDA through devdl. Opens each image named on the command line
 * (DEVDL_NOW | DEVDL_GLOBAL, in order), finds the kernel (AppKernel, or the one -k names) in the
 * global scope and launches it with the CUDA driver in the context devdl linked for. Built as
 * cuda-seed-linked, the program is linked with libcudaseedlib.so, whose device image brings
 * LibDeviceFunc: then only the application's image is named. Prints 0 2 4 6 8 10 12 14. */
#include <cuda.h>
#include <devdl.h>

#include <stdio.h>
#include <string.h>

#ifdef LINKED
int cudaseedlib_version(void);
#endif

int main(int argc, char **argv) {
  const char *name = "AppKernel";
  int first = 1;
  if (argc > 2 && strcmp(argv[1], "-k") == 0) {
    name = argv[2];
    first = 3;
  }
#ifdef LINKED
  printf("libcudaseedlib version %d carries LibDeviceFunc\n", cudaseedlib_version());
#endif
  for (int i = first; i < argc; ++i)
    if (!device_dlopen(argv[i], DEVDL_NOW | DEVDL_GLOBAL)) return fprintf(stderr, "%s\n", device_dlerror()), 1;
  CUfunction kernel = device_dlsym(device_dlopen(NULL, 0), name);
  devdl_native native = {0};
  native.size = sizeof native;
  native.backend = DEVDL_BACKEND_CUDA;
  if (!kernel || device_dlnative(&native) != 0) return fprintf(stderr, "%s\n", device_dlerror()), 1;

  enum { N = 8 };
  int out[N];
  CUdeviceptr buffer = 0;
  void *args[] = {&buffer};
  cuCtxPushCurrent((CUcontext)native.context);
  if (cuMemAlloc(&buffer, sizeof out) != CUDA_SUCCESS ||
      cuLaunchKernel(kernel, 1, 1, 1, N, 1, 1, 0, NULL, args, NULL) != CUDA_SUCCESS ||
      cuMemcpyDtoH(out, buffer, sizeof out) != CUDA_SUCCESS)
    return fprintf(stderr, "running %s failed\n", name), 1;
  for (int i = 0; i < N; ++i) printf("%d%s", out[i], i + 1 < N ? " " : "\n");
  cuMemFree(buffer);
  cuCtxPopCurrent(NULL);
  return 0;
}
