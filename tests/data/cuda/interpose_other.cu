// Defines Answer too, and Other, which the application needs: its Answer is made local.
extern "C" __device__ int Answer() { return 1; }
extern "C" __device__ int Other(int x) { return x + 10; }
