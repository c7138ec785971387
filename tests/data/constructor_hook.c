// A host library whose constructor calls back into the process that loads it, while the host
// loader holds its lock: the process's devdl_test_constructor_hook, where it exports one.
#include <dlfcn.h>

__attribute__((constructor)) static void loaded(void) {
  void (*hook)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "devdl_test_constructor_hook");
  if (hook) hook();
}
