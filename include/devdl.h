/* devdl: dlopen for device code. The public C API: the calls of <dlfcn.h> for device images, and
 * the devices they link for. SYCL's calls by host object are in devdl_sycl.h, the CUDA runtime's
 * registration of relocatable device code in devdl_cuda.h; this header includes both (programs
 * written before they were apart compile unchanged).
 *
 * These headers are C99 and ABI-stable: functions are never removed or changed once released,
 * and every struct that may grow begins with its size: the caller's sizeof where the caller
 * fills it in, devdl's where devdl hands the struct over (devdl_image_info, as dl_iterate_phdr
 * gives its callback the size of what it fills). */
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
#define DEVDL_NOW 0x00002      /* resolve every import of every image (kernels or not) and link at open; fail if one is missing */
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
 * OpenCL, CUfunction for CUDA), a variable's device address (CUDA: a CUdeviceptr), a function's
 * device pointer where the backend has one. As dlsym(handle) does, it searches the handle's
 * images, then the images their imports bind to, breadth first; what is found there comes from
 * the program the handle's kernels use (a variable: the instance they read). With the global
 * scope's handle, a variable comes from the first program linked with its image. NULL with an
 * error for device_dlerror when there is none, or when linking failed. The object belongs to
 * devdl and lives until the handle is closed. A kernel's object on OpenCL and Level Zero is the
 * calling thread's own (they hold their arguments: a thread sets its own and launches without
 * waiting for others), the same at each of its lookups, released when the thread ends; CUDA's
 * CUfunction takes no arguments and is one for all threads. */
DEVDL_API void *device_dlsym(void *handle, const char *name);

/* Drops one reference; at zero the images are unloaded: out of the scopes at once, and freed
 * with the last program that uses them (programs other handles use are kept, as the host loader
 * keeps a library its dependents use). A DEVDL_NODELETE handle stays loaded at zero, and closing
 * it once more is an error.
 * Returns 0, or non-zero with an error for device_dlerror. */
DEVDL_API int device_dlclose(void *handle);

/* The last error of this thread, or NULL if none since the last call. */
DEVDL_API const char *device_dlerror(void);

/* Opens the device images in memory (`size` bytes at `data`: any format device_dlopen reads),
 * labelled `name` in errors and listings. devdl reads a copy, which programs linked from the
 * images keep: the memory need only stay valid, unchanged, until the handle is closed (it is
 * what makes a second open the same). The same `data` and `size` opened again return the same
 * handle with one more reference. */
DEVDL_API void *device_dlopen_mem(const void *data, size_t size, const char *name, int flags);

/* Symbol kinds. */
#define DEVDL_SYMBOL_KERNEL 1
#define DEVDL_SYMBOL_FUNCTION 2
#define DEVDL_SYMBOL_VARIABLE 3

/* Where a symbol is defined. The strings belong to devdl and live as long as the image. */
typedef struct devdl_symbol_info {
  size_t size;       /* set by the caller to sizeof(devdl_symbol_info) */
  int kind;          /* DEVDL_SYMBOL_... */
  const char *file;  /* the file (or memory name) of the defining image */
  unsigned image;    /* the image's position in that file */
  const char *format; /* "spirv", "spir-bc", "cubin", "ptx", "fatbin", "elf", "opencl-binary" */
} devdl_symbol_info;

/* Describes the definition `name` binds to in the scope of `handle` (NULL's global scope with
 * device_dlopen(NULL, ...)'s handle). Returns 0, or non-zero with an error for device_dlerror. */
DEVDL_API int device_dlsyminfo(void *handle, const char *name, devdl_symbol_info *info);

/* What a device address belongs to, as dladdr says of host addresses. The strings belong to devdl
 * and live as long as the process. */
typedef struct devdl_addr_info {
  size_t size;                /* set by the caller to sizeof(devdl_addr_info): the struct may grow */
  const char *file;           /* the file (or memory name) of the image that defines the symbol */
  unsigned image;             /* the image's position in that file */
  const char *symbol;         /* the variable the address lies in, or the function it points to */
  void *symbol_address;       /* where that symbol starts */
  size_t offset;              /* address - symbol_address */
  int kind;                   /* DEVDL_SYMBOL_VARIABLE or DEVDL_SYMBOL_FUNCTION */
} devdl_addr_info;

/* Names the symbol of a linked program that `address` belongs to: a device address devdl handed
 * out (device_dlsym), or one a kernel computed or a variable holds (a CUDA function pointer, a
 * variable placed in host memory on OpenCL, a Level Zero global pointer). A variable's whole
 * extent is its; a function is named by the address it starts at, as a function pointer holds
 * it. For naming a function pointer or a faulting address in a crash report. Returns non-zero
 * and fills `info` when a loaded program holds the address; 0 when none does (with a reason for
 * device_dlerror), as dladdr. */
DEVDL_API int device_dladdr(const void *address, devdl_addr_info *info);

/* Sets specialization constant `spec_id` (the SPIR-V SpecId) of the images of `handle` that
 * declare it to the `size` bytes at `value` (1, 2, 4 or 8: the constant's width), for the
 * programs linked for them from now on; kernels found before keep their programs and values.
 * Programs are cached (in memory and on disk) by these values too. Returns 0, or non-zero with
 * an error for device_dlerror (no image of the handle declares the constant, a bad size). */
DEVDL_API int device_dlspecialize(void *handle, unsigned spec_id, const void *value, size_t size);

/* Copies `size` bytes between host memory and the device variable `name` in the scope of
 * `handle` (the instance device_dlsym would give: the one its kernels use; each device's program
 * has its own, and a view of the handle reaches its device's: device_dlview), from byte `offset`
 * of the variable on: device_dlread into `dst`, device_dlwrite from `src`. Done when it returns.
 * Returns 0, or non-zero with an error for device_dlerror (no such variable, bytes outside it, a
 * backend that cannot). */
DEVDL_API int device_dlread(void *handle, const char *name, size_t offset, void *dst, size_t size);
DEVDL_API int device_dlwrite(void *handle, const char *name, size_t offset, const void *src, size_t size);

/* The link plan of kernel `name` in the scope of `handle`, as text: the kernel's image, then
 * one line per import and the image it binds to. NULL with an error for device_dlerror when
 * an import does not resolve. The text is valid until this thread's next call. */
DEVDL_API const char *device_dlplan(void *handle, const char *name);

/* One image, as device_dliterate reports it. */
typedef struct devdl_image_info {
  size_t size;        /* set by devdl to its sizeof(devdl_image_info): a field past it is not there */
  const char *file;   /* the file (or memory name) it came from; "" for the executable */
  unsigned index;     /* its position in that file */
  const char *format; /* "spirv", ... */
  const char *target; /* e.g. spir64-unknown-unknown, nvptx64-nvidia-cuda */
  int global;         /* non-zero when in the global scope */
  size_t symbols;     /* kernels, exports and imports */
} devdl_image_info;

/* Calls `callback` for each loaded image: the global scope in search order, then the others in
 * load order, as dl_iterate_phdr does for host objects. Stops when the callback returns
 * non-zero and returns that value; 0 when every image was reported. The callback may call
 * devdl; the strings are valid during the call. */
DEVDL_API int device_dliterate(int (*callback)(const devdl_image_info *info, void *data), void *data);

/* Backends. */
#define DEVDL_BACKEND_OPENCL 1
#define DEVDL_BACKEND_LEVEL_ZERO 2
#define DEVDL_BACKEND_CUDA 3

/* The native objects devdl links for, so that the program can allocate and launch. */
typedef struct devdl_native {
  size_t size;    /* set by the caller to sizeof(devdl_native): the struct may grow */
  int backend;    /* DEVDL_BACKEND_...; for device_dlnative, 0 asks for the default one */
  void *platform; /* OpenCL: cl_platform_id; Level Zero: ze_driver_handle_t; CUDA: NULL */
  void *device;   /* OpenCL: cl_device_id; Level Zero: ze_device_handle_t; CUDA: the CUdevice
                     ordinal, cast to a pointer */
  void *context;  /* OpenCL: cl_context; Level Zero: ze_context_handle_t; CUDA: CUcontext */
} devdl_native;

/* Fills `native` for the device devdl uses on `native->backend` (choosing it on first use). With
 * backend 0: the backend DEVDL_BACKEND names, else one in use, else the first that has a device
 * (OpenCL, then CUDA, then Level Zero). Returns 0, or non-zero with an error for device_dlerror. */
DEVDL_API int device_dlnative(devdl_native *native);

/* Makes devdl link for the program's own device and context on `native->backend` instead of
 * choosing one. OpenCL: `device` and `context` (`platform` may be NULL); devdl keeps a reference
 * to the context. Level Zero: the driver (`platform`), the device, and a context that outlives
 * devdl's use of it, or NULL for one of devdl's own. CUDA: the device ordinal and a context that
 * outlives devdl's use of it, or NULL for the device's primary context. Only before the first
 * program is linked on that backend, or again with the same device and context. Returns 0, or
 * non-zero with an error for device_dlerror.
 *
 * Without it, devdl takes the device DEVDL_DEVICE names (its index among the backend's devices,
 * or a part of its name), else the first (OpenCL: that has a compiler; CUDA: the context
 * current on the calling thread, else device 0's primary context). Each image family goes to its
 * backend (SPIR-V to OpenCL, or Level Zero where OpenCL has no device; cubin, PTX and fatbin to
 * CUDA) unless DEVDL_BACKEND names one. */
DEVDL_API int device_dlattach(const devdl_native *native);

/* The same handle on another device: `device->backend` and `device->device` name it (Level Zero:
 * `platform`, its driver, too), `device->context` a context of the program's that outlives
 * devdl's use of it, or NULL for devdl's own on that device (CUDA: the primary context). A view
 * takes the handle's place in every call that takes a handle (device_dlsym, device_dlsyminfo,
 * device_dlread and device_dlwrite, device_dlspecialize, the calls by host object,
 * device_dlplan, device_dlview): the same images, scopes and plans, linked for that device (the
 * images its backend links; the others for their default devices), each device with its own
 * programs, kernels and variables: device_dlread and device_dlwrite on a view reach that
 * device's instance. `handle` may be the global scope's, or a view (then: of its handle). The same
 * handle and device give the same view; it lives as long as its handle, and device_dlclose of it
 * does nothing. A handle opened DEVDL_NOW is linked for the device now. Programs of devices of one
 * model share their binary: the second device's first kernel loads what the first linked. NULL
 * with an error for device_dlerror (an invalid handle, a device the backend cannot open). */
DEVDL_API void *device_dlview(void *handle, const devdl_native *device);

#ifdef __cplusplus
}
#endif

#include "devdl_sycl.h"
#include "devdl_cuda.h"

#endif /* DEVDL_H */
