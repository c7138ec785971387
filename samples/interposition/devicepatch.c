// The host side of libdevicepatch.so: nothing but the device image devdl-pack links in.
int devicepatch_version(void) { return 1; }
