// A stand-in libcuda.so.1, not a driver: every call succeeds and does nothing, so that devdl's CUDA
// paths run on a machine without an NVIDIA GPU: scripts/hit-path.sh follows its hit path under
// valgrind; scripts/cuda-link-record.sh records what devdl gives the driver (with
// DEVDL_STAND_IN_RECORD=DIR: each cuLinkAddData's input, named, and each module cuModuleLoadData
// loads, one file each in DIR, numbered in call order). No test uses it. It has the calls devdl
// and bench_cache's child make, with the driver's names (the _v2 entry points where cuda.h maps a
// name to one).
#include <stddef.h>
#include <stdlib.h>
#include <elf.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;  // CUDA_SUCCESS is 0
static char context, module, function, linkState;
static char linked[64];
static int recorded;

// Writes `size` bytes at `data` to DEVDL_STAND_IN_RECORD/NNN-WHAT, after a line naming it.
static void record(const char *what, const void *data, size_t size, const char *name) {
  const char *dir = getenv("DEVDL_STAND_IN_RECORD");
  if (!dir) return;
  char path[4096];
  snprintf(path, sizeof path, "%s/%03d-%s", dir, recorded++, what);
  FILE *file = fopen(path, "wb");
  if (!file) return;
  if (name) fprintf(file, "%s\n", name);
  fwrite(data, 1, size, file);
  fclose(file);
}

CUresult cuInit(unsigned flags) { return 0; }
CUresult cuDriverGetVersion(int *version) { *version = 13000; return 0; }
CUresult cuGetErrorName(CUresult code, const char **name) { *name = "CUDA_STAND_IN"; return 0; }
CUresult cuDeviceGetCount(int *count) { *count = 1; return 0; }
CUresult cuDeviceGet(int *device, int ordinal) { *device = 0; return 0; }
CUresult cuDeviceGetName(char *name, int length, int device) {
  strncpy(name, "stand-in for scripts/hit-path.sh", (size_t)length);
  return 0;
}
// Compute capability 9.0 (attributes 75 and 76, major and minor): the cubins nvcc made for sm_90.
CUresult cuDeviceGetAttribute(int *value, int attribute, int device) {
  *value = attribute == 75 ? 9 : 0;
  return 0;
}
CUresult cuDevicePrimaryCtxRetain(void **ctx, int device) { *ctx = &context; return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(int device) { return 0; }
CUresult cuCtxGetCurrent(void **ctx) { *ctx = &context; return 0; }
CUresult cuCtxGetDevice(int *device) { *device = 0; return 0; }
CUresult cuCtxPushCurrent_v2(void *ctx) { return 0; }
CUresult cuCtxPopCurrent_v2(void **ctx) { *ctx = &context; return 0; }
CUresult cuCtxSynchronize(void) { return 0; }
CUresult cuLinkCreate_v2(unsigned n, void *options, void **values, void **state) { *state = &linkState; return 0; }
CUresult cuLinkAddData_v2(void *state, int type, void *data, size_t size, const char *name, unsigned n,
                          void *options, void **values) {
  char what[32];
  snprintf(what, sizeof what, "input-type%d", type);
  record(what, data, size, name);
  return 0;
}
CUresult cuLinkAddFile_v2(void *state, int type, const char *path, unsigned n, void *options, void **values) {
  return 0;
}
CUresult cuLinkComplete(void *state, void **out, size_t *size) {
  memset(linked, 7, sizeof linked);
  *out = linked;
  *size = sizeof linked;
  return 0;
}
CUresult cuLinkDestroy(void *state) { return 0; }
// A module is a cubin (an ELF file, whose section headers end it), or devdl's packed parts.
CUresult cuModuleLoadData(void **mod, const void *image) {
  const Elf64_Ehdr *elf = image;
  if (memcmp(elf->e_ident, ELFMAG, SELFMAG) == 0)
    record("module", image, elf->e_shoff + (size_t)elf->e_shnum * elf->e_shentsize, NULL);
  else
    record("module-not-a-cubin", image, 16, NULL);
  *mod = &module;
  return 0;
}
CUresult cuModuleUnload(void *mod) { return 0; }
CUresult cuModuleGetFunction(void **fn, void *mod, const char *name) { *fn = &function; return 0; }
CUresult cuFuncGetModule(void **mod, void *fn) { *mod = &module; return 0; }
CUresult cuModuleGetGlobal_v2(unsigned long long *address, size_t *size, void *mod, const char *name) {
  *address = 0x1000;
  *size = 64;  // room for a cell's address
  return 0;
}
CUresult cuMemAlloc_v2(unsigned long long *pointer, size_t size) {
  *pointer = (unsigned long long)(size_t)malloc(size);
  return 0;
}
CUresult cuMemFree_v2(unsigned long long pointer) { free((void *)(size_t)pointer); return 0; }
CUresult cuMemcpyHtoD_v2(unsigned long long device, const void *host, size_t size) { return 0; }
CUresult cuMemcpyDtoH_v2(void *host, unsigned long long device, size_t size) { memset(host, 0, size); return 0; }
CUresult cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned sharedBytes, void *stream, void **arguments, void **extra) {
  return 0;
}
