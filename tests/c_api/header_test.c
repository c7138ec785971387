/* Compiled as C99 against include/devdl.h alone, linked with libdevdl.so: the public API is C
 * and the library reports the version the header describes. */
#include <devdl.h>

#include <stdio.h>

int main(void) {
  unsigned version = device_dlversion();
  if (version != DEVDL_VERSION) {
    fprintf(stderr, "device_dlversion() = %#x, header says %#x\n", version, (unsigned)DEVDL_VERSION);
    return 1;
  }
  return 0;
}
