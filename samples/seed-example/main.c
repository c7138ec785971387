/* The seeds' example through devdl: the application's kernel calls LibDeviceFunc, which lives
 * in another device image. Without -DLINKED the program opens the library's image itself;
 * with it, the program is linked with libdevicelib.so, which carries that image, and opens
 * only its own; with -DNEEDED it opens app-needs.devdl, a bundle that names the library's file
 * (devdl-pack --needed), which devdl loads with it. Prints 0 2 4 6 8 10 12 14. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <devdl.h>

#include <stdio.h>

#ifdef LINKED
int devicelib_version(void);
#endif

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : ".";
  char path[4096];
#if defined(LINKED)
  printf("libdevicelib version %d carries LibDeviceFunc\n", devicelib_version());
#elif !defined(NEEDED)
  snprintf(path, sizeof path, "%s/lib.spv", dir);
  if (!device_dlopen(path, DEVDL_NOW | DEVDL_GLOBAL)) return fprintf(stderr, "%s\n", device_dlerror()), 1;
#endif
#ifdef NEEDED
  snprintf(path, sizeof path, "%s/app-needs.devdl", dir);
#else
  snprintf(path, sizeof path, "%s/app.spv", dir);
#endif
  void *app = device_dlopen(path, DEVDL_NOW);
  if (!app) return fprintf(stderr, "%s\n", device_dlerror()), 1;
  cl_kernel kernel = device_dlsym(app, "AppKernel");
  devdl_native native = {0};
  native.size = sizeof native;
  if (!kernel || device_dlnative(&native) != 0) return fprintf(stderr, "%s\n", device_dlerror()), 1;

  enum { N = 8 };
  int out[N];
  size_t n = N;
  cl_command_queue queue = clCreateCommandQueueWithProperties(native.context, native.device, NULL, NULL);
  cl_mem buffer = clCreateBuffer(native.context, CL_MEM_WRITE_ONLY, sizeof out, NULL, NULL);
  clSetKernelArg(kernel, 0, sizeof buffer, &buffer);
  clEnqueueNDRangeKernel(queue, kernel, 1, NULL, &n, NULL, 0, NULL, NULL);
  if (clEnqueueReadBuffer(queue, buffer, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL) != CL_SUCCESS)
    return fprintf(stderr, "running AppKernel failed\n"), 1;
  for (int i = 0; i < N; ++i) printf("%d%s", out[i], i + 1 < N ? " " : "\n");
  clReleaseMemObject(buffer);
  clReleaseCommandQueue(queue);
  return device_dlclose(app);
}
