/* Opens each argument with device_dlopen(DEVDL_LAZY) and prints "NAME: opened" or the error (which
 * names the file), a line each: what a program sees of files and environments the hostile-input
 * tests give it, setuid among them. */
#include <devdl.h>

#include <stdio.h>

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    void *handle = device_dlopen(argv[i], DEVDL_LAZY);
    if (handle) printf("%s: opened\n", argv[i]);
    else printf("%s\n", device_dlerror()); /* it names the file */
  }
  return 0;
}
