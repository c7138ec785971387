// The seed's library: exports LibDeviceFunc, and a device global.
int LibDeviceFunc(int x) { return 2 * x; }

global int LibCounter = 7;

// An overloadable function gets a C++ mangled name (_Z8LibScalei): for devdl-nm -C.
__attribute__((overloadable)) int LibScale(int x) { return 3 * x; }
