/* devdl: dlopen for device code. The public C API; the only header devdl installs.
 *
 * This header is C99 and ABI-stable: functions are never removed or changed once released,
 * and every struct that may grow begins with its size. */
#ifndef DEVDL_H
#define DEVDL_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define DEVDL_API __attribute__((visibility("default")))
#else
#define DEVDL_API
#endif

/* The version this header describes. */
#define DEVDL_VERSION_MAJOR 0
#define DEVDL_VERSION_MINOR 1
#define DEVDL_VERSION_PATCH 0
#define DEVDL_VERSION ((DEVDL_VERSION_MAJOR << 16) | (DEVDL_VERSION_MINOR << 8) | DEVDL_VERSION_PATCH)

#include <stddef.h>

/* The version of the library loaded at run time, encoded as DEVDL_VERSION. */
DEVDL_API unsigned device_dlversion(void);

/* Flags of device_dlopen, with <dlfcn.h>'s values and meanings. One of LAZY and NOW. */
#define DEVDL_LAZY 0x00001     /* link when a symbol is first needed (at device_dlsym) */
#define DEVDL_NOW 0x00002      /* resolve every import and link at open; fail if one is missing */
#define DEVDL_NOLOAD 0x00004   /* do not load: return the handle if already open, else NULL */
#define DEVDL_DEEPBIND 0x00008 /* resolve the image's imports in its own scope first */
#define DEVDL_GLOBAL 0x00100   /* add the images to the global scope */
#define DEVDL_LOCAL 0          /* keep them out of it (the default); a later GLOBAL open promotes */
#define DEVDL_NODELETE 0x01000 /* never unload, even when device_dlclose drops the last reference */

/* Opens the device images of `path` (SPIR-V, a bundle, a host ELF file carrying bundles, ...)
 * and returns a handle, or NULL with an error for device_dlerror. A path without a slash is
 * searched in DEVDL_LIBRARY_PATH. The same file opened again returns the same handle with one
 * more reference. path NULL is the global scope: the images of the running process and of
 * every handle opened DEVDL_GLOBAL. */
DEVDL_API void *device_dlopen(const char *path, int flags);

/* The native object for `name` in the scope of `handle`: a kernel's handle (cl_kernel for
 * OpenCL), a variable's device address, a function's device pointer where the backend has one.
 * NULL with an error for device_dlerror when there is none, or when linking failed. The object
 * belongs to devdl and lives until the handle is closed. */
DEVDL_API void *device_dlsym(void *handle, const char *name);

/* Drops one reference; the images are unloaded at zero, with every program built from them.
 * Returns 0, or non-zero with an error for device_dlerror. */
DEVDL_API int device_dlclose(void *handle);

/* The last error of this thread, or NULL if none since the last call. */
DEVDL_API const char *device_dlerror(void);

/* Backends. */
#define DEVDL_BACKEND_OPENCL 1
#define DEVDL_BACKEND_LEVEL_ZERO 2
#define DEVDL_BACKEND_CUDA 3

/* The native objects devdl links for, so that the program can allocate and launch. */
typedef struct devdl_native {
  size_t size;    /* set by the caller to sizeof(devdl_native): the struct may grow */
  int backend;    /* DEVDL_BACKEND_... */
  void *platform; /* OpenCL: cl_platform_id */
  void *device;   /* OpenCL: cl_device_id */
  void *context;  /* OpenCL: cl_context */
} devdl_native;

/* Fills `native` for the device devdl uses (choosing it on first use). Returns 0, or non-zero
 * with an error for device_dlerror. */
DEVDL_API int device_dlnative(devdl_native *native);

#ifdef __cplusplus
}
#endif

#endif /* DEVDL_H */
