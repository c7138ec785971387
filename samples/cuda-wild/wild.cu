// CUDA as it is written in the wild, with device code across shared libraries, each checked
// against what it must compute:
//   Thrust and CUB in a library and in the program (the same template instantiations, weak device
//   symbols, in both), the library's __device__ function called through a Thrust functor;
//   the library's __managed__ variable, read and written by the host and by the program's kernel;
//   dynamic parallelism: the program's kernel launches the library's kernel (the device runtime);
//   two plugins linked with one static library of device code (counter.cu), opened with dlopen
//   RTLD_GLOBAL (one instance of its variable: the first plugin's) or RTLD_LOCAL (each its own, as
//   ld.so gives each local plugin its own copy of a static library), one closed and the other
//   still working.
//
//   cuda-wild [--global | --local] PLUGIN_A.so PLUGIN_B.so
// Prints a line a check and "all right" at the end where every check passed.
#include "sorter.h"

#include <dlfcn.h>
#include <thrust/device_ptr.h>
#include <thrust/device_vector.h>
#include <thrust/sort.h>
#include <thrust/transform.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

int failures = 0;

void expect(bool ok, const std::string &what) {
  if (!ok) ++failures;
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
}

struct Scale {
  __device__ int operator()(int x) const { return scaled(x); }
};

}  // namespace

__global__ void parent(int *out, int n) { fill_scaled<<<(n + 63) / 64, 64>>>(out, n); }
__global__ void read_calls(int *out) { *out = sorter_calls; }

namespace {

std::vector<int> pattern(int n) {
  std::vector<int> values(n);
  for (int i = 0; i < n; ++i) values[i] = (7 * (n - i)) % 101;
  return values;
}

void thrustOnBothSides() {
  const int n = 1000;
  std::vector<int> host = pattern(n);
  thrust::device_vector<int> values(host.begin(), host.end());
  thrust::transform(values.begin(), values.end(), values.begin(), Scale());
  thrust::sort(thrust::device_ptr<int>(thrust::raw_pointer_cast(values.data())),
               thrust::device_ptr<int>(thrust::raw_pointer_cast(values.data()) + n));
  std::vector<int> got(n);
  thrust::copy(values.begin(), values.end(), got.begin());
  std::vector<int> want = host;
  for (int &v : want) v *= 3;
  std::sort(want.begin(), want.end());
  expect(got == want, "the program's Thrust transform (through the library's scaled()) and sort");

  thrust::device_vector<int> more(host.begin(), host.end());
  long long sum = -1;
  const int err = sorter_sort_and_sum(thrust::raw_pointer_cast(more.data()), n, &sum);
  std::vector<int> sorted(n);
  thrust::copy(more.begin(), more.end(), sorted.begin());
  std::vector<int> ascending = host;
  std::sort(ascending.begin(), ascending.end());
  long long total = 0;
  for (int v : host) total += v;
  expect(err == 0 && sorted == ascending && sum == total,
         "the library's Thrust sort and CUB sum: " + std::to_string(sum) + " (" + std::to_string(total) + ")");
}

void managedAcrossLibraries() {
  int *out = nullptr;
  cudaMallocManaged(&out, sizeof *out);
  *out = -1;
  read_calls<<<1, 1>>>(out);
  cudaDeviceSynchronize();
  expect(sorter_calls == 1 && *out == 1, "the library's __managed__ counter, on the host and in the program's kernel: " +
                                             std::to_string(sorter_calls) + ", " + std::to_string(*out));
  sorter_calls = 41;
  read_calls<<<1, 1>>>(out);
  cudaDeviceSynchronize();
  expect(*out == 41, "the host's write to it, read by the program's kernel: " + std::to_string(*out));
  cudaFree(out);
}

void dynamicParallelism() {
  const int n = 300;
  int *out = nullptr;
  cudaMalloc(&out, n * sizeof *out);
  cudaMemset(out, 0xff, n * sizeof *out);
  parent<<<1, 1>>>(out, n);
  const cudaError_t err = cudaDeviceSynchronize();
  std::vector<int> got(n);
  cudaMemcpy(got.data(), out, n * sizeof *out, cudaMemcpyDeviceToHost);
  cudaFree(out);
  bool right = err == cudaSuccess;
  for (int i = 0; i < n; ++i) right = right && got[i] == 3 * i;
  expect(right, std::string("the program's kernel launching the library's from the device: ") + cudaGetErrorName(err));
}

using Bump = int (*)(int *);

int bump(void *plugin, const char *name) {
  auto run = reinterpret_cast<Bump>(dlsym(plugin, name));
  int value = -1;
  if (!run || run(&value) != 0) return -1;
  return value;
}

void plugins(int mode, const char *a, const char *b) {
  const bool global = mode == RTLD_GLOBAL;
  void *first = dlopen(a, RTLD_NOW | mode);
  void *second = dlopen(b, RTLD_NOW | mode);
  if (!first || !second) {
    expect(false, std::string("dlopen: ") + dlerror());
    return;
  }
  const int one = bump(first, "plugin_a_bump"), two = bump(second, "plugin_b_bump");
  expect(one == 1 && two == (global ? 2 : 1),
         std::string(global ? "RTLD_GLOBAL plugins share the static library's counter: "
                            : "RTLD_LOCAL plugins each have the static library's counter: ") +
             std::to_string(one) + ", " + std::to_string(two));
  dlclose(first);
  const int three = bump(second, "plugin_b_bump");
  expect(three == (global ? 3 : 2), "the second plugin, the first closed: " + std::to_string(three));
  dlclose(second);
}

}  // namespace

int main(int argc, char **argv) {
  int mode = RTLD_GLOBAL;
  std::vector<const char *> libraries;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--global")) mode = RTLD_GLOBAL;
    else if (!std::strcmp(argv[i], "--local")) mode = RTLD_LOCAL;
    else libraries.push_back(argv[i]);
  }
  if (libraries.size() != 2) {
    std::fprintf(stderr, "usage: %s [--global | --local] PLUGIN_A.so PLUGIN_B.so\n", argv[0]);
    return 2;
  }
  thrustOnBothSides();
  managedAcrossLibraries();
  dynamicParallelism();
  plugins(mode, libraries[0], libraries[1]);
  if (failures) return 1;
  std::printf("all right\n");
  return 0;
}
