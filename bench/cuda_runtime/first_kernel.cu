// bench_cuda_runtime's program: a kernel calling the library's hot_step in a loop, launched with
// <<<>>>. Prints the nanoseconds from DEVDL_BENCH_START_NS (CLOCK_MONOTONIC, set by whoever started
// the process) to the end of its first kernel; with --kernel-time, "kernel_ms=" the median of 21
// launches of a long loop after it. Exits 1 where a result is wrong.
#include <cuda_runtime.h>

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

__device__ unsigned hot_step(unsigned x);

__global__ void hot(unsigned *out, int steps) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned x = i;
  for (int s = 0; s < steps; ++s) x = hot_step(x);
  out[i] = x;
}

namespace {

constexpr int kBlocks = 264, kThreads = 256;

unsigned stepOnHost(unsigned x) { return (x ^ (x >> 7)) * 1103515245u + 12345u; }

bool right(const unsigned *device, int steps) {
  std::vector<unsigned> out(kBlocks * kThreads);
  if (cudaMemcpy(out.data(), device, out.size() * sizeof(unsigned), cudaMemcpyDeviceToHost) != cudaSuccess) return false;
  for (unsigned i : {0u, 1u, 4097u, static_cast<unsigned>(out.size() - 1)}) {
    unsigned x = i;
    for (int s = 0; s < steps; ++s) x = stepOnHost(x);
    if (out[i] != x) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char **argv) {
  unsigned *out = nullptr;
  if (cudaMalloc(&out, kBlocks * kThreads * sizeof(unsigned)) != cudaSuccess) return std::puts("cudaMalloc failed"), 1;
  hot<<<kBlocks, kThreads>>>(out, 16);
  if (cudaDeviceSynchronize() != cudaSuccess) return std::puts("the first kernel failed"), 1;
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const char *start = std::getenv("DEVDL_BENCH_START_NS");
  const long long elapsed = now.tv_sec * 1000000000LL + now.tv_nsec - (start ? std::atoll(start) : 0);
  if (!right(out, 16)) return std::puts("the first kernel's results are wrong"), 1;
  std::printf("%lld", elapsed);
  if (argc > 1 && std::strcmp(argv[1], "--kernel-time") == 0) {
    constexpr int kSteps = 1 << 14;
    cudaEvent_t begin, end;
    cudaEventCreate(&begin);
    cudaEventCreate(&end);
    std::vector<float> times;
    for (int i = 0; i < 21; ++i) {
      cudaEventRecord(begin);
      hot<<<kBlocks, kThreads>>>(out, kSteps);
      cudaEventRecord(end);
      cudaEventSynchronize(end);
      float ms = 0;
      cudaEventElapsedTime(&ms, begin, end);
      times.push_back(ms);
    }
    std::sort(times.begin(), times.end());
    if (!right(out, kSteps)) return std::puts(" the long kernel's results are wrong"), 1;
    std::printf(" kernel_ms=%.4f", times[times.size() / 2]);
  }
  std::printf("\n");
  return 0;
}
