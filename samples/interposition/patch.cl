// A replacement for the seed library's LibDeviceFunc, shipped in a host library to be
// LD_PRELOADed: it triples instead of doubling.
int LibDeviceFunc(int x) { return 3 * x; }
