// Preloaded (LD_PRELOAD): another definition of libcudamath's mathf, which every kernel that
// calls it from another library binds to, as ld.so binds host calls.
__device__ int mathf(int x) { return x + 100; }
