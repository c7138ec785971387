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

/* The version of the library loaded at run time, encoded as DEVDL_VERSION. */
DEVDL_API unsigned device_dlversion(void);

#ifdef __cplusplus
}
#endif

#endif /* DEVDL_H */
