/* devdl: the CUDA runtime's relocatable device code linked at load time, the part of the public C
 * API that serves the registration object devdl-pack --cuda-register generates (devdl-pack(1)).
 * nvcc -rdc=true objects register their device code through __cudaRegisterLinkedBinary_<id>,
 * which nvcc -dlink defines by linking the objects of one library statically; the registration
 * object defines it instead and, once every object of the library or executable has called it,
 * asks libdevdl to link their device code against the device code already in the process, in the
 * host loader's order, and hands the result to the CUDA runtime. The dlfcn-like calls are in
 * devdl.h, which this header includes. */
#ifndef DEVDL_CUDA_H
#define DEVDL_CUDA_H

#include "devdl.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One library's (or executable's) relocatable device code, as its registration object describes
 * it to libdevdl. libdevdl reads the code from the file of the object that holds `within` (its
 * __nv_relfatbin section) and calls `load` once, from device_dlregister_cuda. */
typedef struct devdl_cuda_objects {
  size_t size;        /* sizeof(devdl_cuda_objects), for later versions */
  const void *within; /* an address in the library or executable the objects are linked into */
  /* Registers `image` (a linked cubin of `size` bytes, which stays valid until
   * device_dlunregister_cuda) with the CUDA runtime the objects use: __cudaRegisterFatBinary, a
   * host function for the kernel `anchor` devdl links into the image, each object's callback,
   * __cudaRegisterFatBinaryEnd. Returns the CUfunction of `anchor` in the module the runtime
   * loaded (cudaGetFuncBySymbol), NULL where it did not: libdevdl looks up the module's kernels
   * and variables there, so that the runtime and devdl reach the same instances. */
  void *(*load)(void *context, const void *image, size_t size, const char *anchor);
  void *context;
} devdl_cuda_objects;

/* Links the objects' device code (devdl_cuda_objects) and has `load` register it. 0 on success;
 * -1 with an error for device_dlerror, worded as ld.so words a lookup error ("app: device symbol
 * lookup error: libplugin.so: image 0 (fatbin sm_90): undefined device symbol `f`"), when the
 * code cannot be linked or loaded: nothing is registered, and the objects' kernels fail to launch
 * with the runtime's own error. -2, with the same error, where a device symbol is undefined in an
 * object the host loader loaded with the program (the executable, an LD_PRELOAD object, or one
 * they need): the registration object then ends the process with status 127, as ld.so ends a
 * program whose libraries' symbols do not resolve. */
DEVDL_API int device_dlregister_cuda(devdl_cuda_objects *objects);

/* Called as the library unloads (or at exit), after the runtime unregistered the image
 * (__cudaUnregisterFatBinary): libdevdl lets go of what it holds for it. */
DEVDL_API void device_dlunregister_cuda(devdl_cuda_objects *objects);

#ifdef __cplusplus
}
#endif

#endif /* DEVDL_CUDA_H */
