// The host side of a library that ships device code: its device image (lib.cl, exporting
// LibDeviceFunc) is linked in by devdl-pack's object, so loading this library is enough for
// devdl to find it.
int devicelib_version(void) { return 1; }
