// Interposition by symbol: the first Answer in search order, which the application uses.
extern "C" __device__ int Answer() { return 2; }
