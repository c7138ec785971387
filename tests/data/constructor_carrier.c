// A host library whose constructor and destructor call devdl, as code generated for the seeds'
// registration model does: they run while the host loader holds its lock. It carries a bundle
// too, so that each of those calls finds a new object to read.
#include <devdl.h>

static void lookUp(void) {
  void *global = device_dlopen(0, DEVDL_LAZY);
  if (global) (void)device_dlsym(global, "LibDeviceFunc");
  (void)device_dlerror();
}

__attribute__((constructor)) static void loaded(void) { lookUp(); }
__attribute__((destructor)) static void unloaded(void) { lookUp(); }

const char *devdl_test_carrier(void) { return "devdl_test_constructor"; }
