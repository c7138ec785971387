/* A host shared library whose only device code is the seed library's image (lib.cubin),
 * packed in by devdl-pack --object: linking the program with it brings LibDeviceFunc. */
int cudaseedlib_version(void) { return 1; }
