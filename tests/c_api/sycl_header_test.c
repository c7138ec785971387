/* Compiled as C99 against include/devdl_sycl.h alone: it brings devdl.h, and a device global
 * registered by the name SYCL compilers call is what devdl's own name registers. */
#include <devdl_sycl.h>

#include <stdio.h>
#include <string.h>

static int counter = 7;

int main(void) {
  /* No image defines the id: the read fails naming it, so the object was registered. */
  int value = 0;
  device_dlregister(&counter, "devdl_sycl_header_test_counter", "device_global");
  if (device_dlread_object(device_dlopen(NULL, DEVDL_LAZY), &counter, 0, &value, sizeof value) == 0) {
    fprintf(stderr, "read a device global no image defines\n");
    return 1;
  }
  const char *error = device_dlerror();
  if (!error || !strstr(error, "devdl_sycl_header_test_counter")) {
    fprintf(stderr, "the error does not name the id: %s\n", error ? error : "(none)");
    return 1;
  }
  return device_dlversion() == DEVDL_VERSION ? 0 : 1;
}
