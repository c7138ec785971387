// Small kernels beside the seed's library function, in OpenCL C or CUDA (the includer defines
// DEVDL_KERNEL, DEVDL_GLOBAL and DEVDL_INDEX): a library of 1,000 kernels of which an application
// uses none, against one of a single kernel, for what unused kernels cost a first kernel
// (bench_cache, issue 41). SmallKernel000 to SmallKernel999.
#define DEVDL_SMALL(n) \
  DEVDL_KERNEL void SmallKernel##n(DEVDL_GLOBAL float *data) { data[DEVDL_INDEX] = data[DEVDL_INDEX] * 1.5f + 1##n; }
#define DEVDL_SMALL_10(n) DEVDL_SMALL(n##0) DEVDL_SMALL(n##1) DEVDL_SMALL(n##2) DEVDL_SMALL(n##3) DEVDL_SMALL(n##4) \
  DEVDL_SMALL(n##5) DEVDL_SMALL(n##6) DEVDL_SMALL(n##7) DEVDL_SMALL(n##8) DEVDL_SMALL(n##9)
#define DEVDL_SMALL_100(n) DEVDL_SMALL_10(n##0) DEVDL_SMALL_10(n##1) DEVDL_SMALL_10(n##2) DEVDL_SMALL_10(n##3) \
  DEVDL_SMALL_10(n##4) DEVDL_SMALL_10(n##5) DEVDL_SMALL_10(n##6) DEVDL_SMALL_10(n##7) DEVDL_SMALL_10(n##8) \
  DEVDL_SMALL_10(n##9)
#define DEVDL_SMALL_1000 DEVDL_SMALL_100(0) DEVDL_SMALL_100(1) DEVDL_SMALL_100(2) DEVDL_SMALL_100(3) DEVDL_SMALL_100(4) \
  DEVDL_SMALL_100(5) DEVDL_SMALL_100(6) DEVDL_SMALL_100(7) DEVDL_SMALL_100(8) DEVDL_SMALL_100(9)
