// The end-to-end test sources are written once and compiled twice: as OpenCL C (clang-15, then
// llvm-spirv-15 to SPIR-V) and as CUDA (nvcc -rdc, through a .cu that includes the .cl), so that
// one suite runs the same programs on every backend. Names stay unmangled in both. DEVICE: a
// device function (defined or imported); VARIABLE: a device variable defined here; EXTERN_VARIABLE:
// one another image defines; STATIC_VARIABLE: one this image keeps to itself;
// KERNEL: a kernel; GLOBAL: its buffer's address space; THREAD_ID: the work-item's index.
#ifdef __CUDACC__
#define DEVICE extern "C" __device__
#define EXTERN_VARIABLE extern "C" __device__
#define VARIABLE extern "C" __device__
#define STATIC_VARIABLE static __device__
#define KERNEL extern "C" __global__ void
#define GLOBAL
#define THREAD_ID ((int)(blockIdx.x * blockDim.x + threadIdx.x))
#else
#define DEVICE
#define EXTERN_VARIABLE extern global
#define VARIABLE global
#define STATIC_VARIABLE static global
#define KERNEL kernel void
#define GLOBAL global
#define THREAD_ID ((int)get_global_id(0))
#endif
