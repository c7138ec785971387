/* Opens value_user.spv (imports DupValue), runs ValueKernel and prints the value it computed.
 * The program is linked with a host library whose device image defines DupValue = 1. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <devdl.h>

#include <stdio.h>

const char *devdl_test_carrier(void);

int main(int argc, char **argv) {
  if (argc != 2) return fprintf(stderr, "usage: devdl_value_probe value_user.spv\n"), 2;
  devdl_test_carrier(); /* keeps the DT_NEEDED entry of the linked host library */
  void *user = device_dlopen(argv[1], DEVDL_NOW);
  cl_kernel kernel = user ? device_dlsym(user, "ValueKernel") : NULL;
  devdl_native native = {0};
  native.size = sizeof native;
  if (!kernel || device_dlnative(&native) != 0) return fprintf(stderr, "%s\n", device_dlerror()), 1;
  int value = -1;
  size_t one = 1;
  cl_command_queue queue = clCreateCommandQueueWithProperties(native.context, native.device, NULL, NULL);
  cl_mem out = clCreateBuffer(native.context, CL_MEM_WRITE_ONLY, sizeof value, NULL, NULL);
  clSetKernelArg(kernel, 0, sizeof out, &out);
  clEnqueueNDRangeKernel(queue, kernel, 1, NULL, &one, NULL, 0, NULL, NULL);
  clEnqueueReadBuffer(queue, out, CL_TRUE, 0, sizeof value, &value, 0, NULL, NULL);
  printf("DupValue %d\n", value);
  return 0;
}
