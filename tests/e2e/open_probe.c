/* Opens each argument with device_dlopen(DEVDL_LAZY), or DEVDL_NOW where it is written now:NAME (its
 * kernels' programs linked), and prints "NAME: opened" or the error (which names the file), a line
 * each: what a program sees of files and environments the hostile-input tests give it, setuid
 * among them. */
#include <devdl.h>

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    const int now = strncmp(argv[i], "now:", 4) == 0;
    const char *name = now ? argv[i] + 4 : argv[i];
    void *handle = device_dlopen(name, now ? DEVDL_NOW : DEVDL_LAZY);
    if (handle) printf("%s: opened\n", name);
    else printf("%s\n", device_dlerror()); /* it names the file */
  }
  return 0;
}
