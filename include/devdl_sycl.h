/* devdl: SYCL's host objects (device_global and specialization_id), the part of the public C API
 * that serves the code SYCL compilers generate: registering a host object's address under the
 * unique id device images know it by, and reading, writing or setting what it names. The
 * dlfcn-like calls and the devices are in devdl.h, which this header includes. */
#ifndef DEVDL_SYCL_H
#define DEVDL_SYCL_H

#include "devdl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Host objects that device images know by a unique id (SYCL's device_global and
 * specialization_id): the host registers each object's address with its id and kind, before
 * main and from host libraries' constructors, as SYCL compilers generate; the registrations of a
 * host library leave with it. __register_uniquely_identifiable_object is the name SYCL compilers
 * call; device_dlregister is devdl's for the same. */
DEVDL_API void device_dlregister(const void *address, const char *unique_id, const char *kind);
DEVDL_API void __register_uniquely_identifiable_object(void *address, const char *unique_id, const char *kind);

/* device_dlread and device_dlwrite for the device global (kind "device_global") registered at host
 * address `object`: the variable that an image of the handle's scope (its images, then the global
 * scope) names for the object's unique id (`SYCL/device globals`). Errors name the id and say
 * whether the object is unregistered or defined by no image in scope. */
DEVDL_API int device_dlread_object(void *handle, const void *object, size_t offset, void *dst, size_t size);
DEVDL_API int device_dlwrite_object(void *handle, const void *object, size_t offset, const void *src, size_t size);

/* Sets the specialization constant (kind "specialization_id") registered at host address
 * `object` to the `size` bytes at `value` (a value of the host object's type): each SpecId the
 * handle's images map its unique id to (`SYCL/specialization constants`: SpecId, offset, size),
 * as device_dlspecialize does. */
DEVDL_API int device_dlspecialize_object(void *handle, const void *object, const void *value, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* DEVDL_SYCL_H */
