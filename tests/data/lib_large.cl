// The seed's library (LibDeviceFunc) among 512 other functions: a SPIR-V library of 94 KiB, over
// the size from which the disk cache keeps a file's summary (store/image_summary.h).
int LibDeviceFunc(int x) { return 2 * x; }

#define LIB_LARGE(n) int LibLarge##n(int x) { return x * 3 + 1##n; }
#define LIB_LARGE_4(n) LIB_LARGE(n##0) LIB_LARGE(n##1) LIB_LARGE(n##2) LIB_LARGE(n##3)
#define LIB_LARGE_16(n) LIB_LARGE_4(n##0) LIB_LARGE_4(n##1) LIB_LARGE_4(n##2) LIB_LARGE_4(n##3)
#define LIB_LARGE_64(n) LIB_LARGE_16(n##0) LIB_LARGE_16(n##1) LIB_LARGE_16(n##2) LIB_LARGE_16(n##3)
#define LIB_LARGE_256(n) LIB_LARGE_64(n##0) LIB_LARGE_64(n##1) LIB_LARGE_64(n##2) LIB_LARGE_64(n##3)
LIB_LARGE_256(0) LIB_LARGE_256(1)
