/* Loads a kernel through devdl as an application does, LOADS times over: every image but the
 * last opened DEVDL_GLOBAL, the last one opened LAZY, its specialization constants set
 * (--spec ID=VALUE, 32 bits), the kernel found and run on 8 work-items, everything closed
 * again (so that each load finds no program in memory and asks the disk cache). Prints the
 * values of the last run. Exit 1 with devdl's message on an error, 2 when two loads computed
 * different values.
 * --flip-after-open FILE changes FILE once the images are first opened, before the kernel is
 * looked up: a byte in its middle flipped in place; --replace-after-open FILE puts such a copy
 * in its place (renamed over it), as a build or a package manager does. --look-up-only finds the
 * kernel and does not run it (a kernel the device cannot run), and prints nothing. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <devdl.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { kItems = 8, kMaxImages = 8, kMaxSpecs = 8 };

/* FILE with the byte in its middle flipped: in place, or in a copy renamed over it. */
static int change(const char *path, int inPlace) {
  struct stat st;
  if (stat(path, &st) != 0 || st.st_size == 0) return -1;
  char *bytes = malloc(st.st_size);
  FILE *in = fopen(path, "rb");
  const size_t got = in ? fread(bytes, 1, st.st_size, in) : 0;
  if (in) fclose(in);
  if (got != (size_t)st.st_size) return free(bytes), -1;
  bytes[st.st_size / 2] ^= 0x5a;
  char copy[4096];
  snprintf(copy, sizeof copy, "%s.new", path);
  const int fd = inPlace ? open(path, O_WRONLY) : open(copy, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int written = fd >= 0 && write(fd, bytes, st.st_size) == st.st_size;
  if (fd >= 0) close(fd);
  free(bytes);
  if (!written) return -1;
  return inPlace ? 0 : rename(copy, path);
}

int main(int argc, char **argv) {
  unsigned specIds[kMaxSpecs];
  uint32_t specValues[kMaxSpecs];
  int specs = 0;
  const char *changed = NULL;
  int inPlace = 0, lookUpOnly = 0;
  while (argc > 2 && argv[1][0] == '-' && argv[1][1] == '-') {
    if (strcmp(argv[1], "--look-up-only") == 0) {
      lookUpOnly = 1;
      --argc;
      ++argv;
      continue;
    }
    if (strcmp(argv[1], "--spec") == 0 && specs < kMaxSpecs) {
      if (sscanf(argv[2], "%u=%u", &specIds[specs], &specValues[specs]) != 2)
        return fprintf(stderr, "--spec ID=VALUE\n"), 2;
      ++specs;
    } else if (strcmp(argv[1], "--flip-after-open") == 0 || strcmp(argv[1], "--replace-after-open") == 0) {
      changed = argv[2];
      inPlace = argv[1][2] == 'f';
    } else {
      break;
    }
    argc -= 2;
    argv += 2;
  }
  if (argc < 4 || argc - 3 > kMaxImages)
    return fprintf(stderr,
                   "usage: devdl_cache_probe [--spec ID=VALUE]... [--flip-after-open FILE | --replace-after-open "
                   "FILE] [--look-up-only] LOADS KERNEL IMAGE...\n"),
           2;
  const int loads = atoi(argv[1]);
  const char *name = argv[2];
  const int images = argc - 3;
  devdl_native native = {0};
  native.size = sizeof native;
  if (device_dlnative(&native) != 0) return fprintf(stderr, "%s\n", device_dlerror()), 1;
  cl_command_queue queue = clCreateCommandQueueWithProperties(native.context, native.device, NULL, NULL);
  cl_mem out = clCreateBuffer(native.context, CL_MEM_WRITE_ONLY, sizeof(int) * kItems, NULL, NULL);
  int first[kItems], values[kItems];
  for (int load = 0; load < loads; ++load) {
    void *handles[kMaxImages];
    for (int i = 0; i < images; ++i) {
      handles[i] = device_dlopen(argv[3 + i], i + 1 < images ? DEVDL_LAZY | DEVDL_GLOBAL : DEVDL_LAZY);
      if (!handles[i]) return fprintf(stderr, "%s\n", device_dlerror()), 1;
    }
    if (changed && load == 0 && change(changed, inPlace) != 0) return fprintf(stderr, "cannot change %s\n", changed), 1;
    for (int s = 0; s < specs; ++s)
      if (device_dlspecialize(handles[images - 1], specIds[s], &specValues[s], sizeof specValues[s]) != 0)
        return fprintf(stderr, "%s\n", device_dlerror()), 1;
    cl_kernel kernel = device_dlsym(handles[images - 1], name);
    if (!kernel) return fprintf(stderr, "%s\n", device_dlerror()), 1;
    const size_t items = kItems;
    memset(values, 0xff, sizeof values);
    if (!lookUpOnly &&
        (clSetKernelArg(kernel, 0, sizeof out, &out) != CL_SUCCESS ||
         clEnqueueNDRangeKernel(queue, kernel, 1, NULL, &items, NULL, 0, NULL, NULL) != CL_SUCCESS ||
         clEnqueueReadBuffer(queue, out, CL_TRUE, 0, sizeof values, values, 0, NULL, NULL) != CL_SUCCESS))
      return fprintf(stderr, "running %s failed\n", name), 1;
    for (int i = images - 1; i >= 0; --i)
      if (device_dlclose(handles[i]) != 0) return fprintf(stderr, "%s\n", device_dlerror()), 1;
    if (load == 0) memcpy(first, values, sizeof first);
    else if (memcmp(first, values, sizeof first) != 0) return fprintf(stderr, "load %d computed other values\n", load), 2;
  }
  if (!lookUpOnly)
    for (int i = 0; i < kItems; ++i) printf("%d%c", values[i], i + 1 < kItems ? ' ' : '\n');
  clReleaseMemObject(out);
  clReleaseCommandQueue(queue);
  return 0;
}
