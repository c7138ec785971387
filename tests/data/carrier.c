// Host code of a shared library that carries device images (packed in by devdl-pack --object).
#define STRINGIFY(x) #x
#define NAME(x) STRINGIFY(x)

const char *devdl_test_carrier(void) { return NAME(CARRIER_NAME); }
