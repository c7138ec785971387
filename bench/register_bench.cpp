// Registering host objects (issue 20, seed 002): what __register_uniquely_identifiable_object
// costs per object, as code a SYCL compiler generates calls it before main and from host
// libraries' constructors (goal: under 100 ns); and the first lookup after, which settles which
// host object each address lies in.
#include "devdl.h"

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

namespace {

constexpr int kRounds = 20;

// `n` objects registered once each, as a program's and its libraries' constructors do: each round
// registers objects not registered before (the registry grows to kRounds * n).
void BM_RegisterNew(benchmark::State &state) {
  const int n = static_cast<int>(state.range(0));
  static std::vector<int> objects;
  objects.assign(static_cast<size_t>(n) * kRounds + 1, 0);
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) ids.push_back("_Z" + std::to_string(i) + "device_global_object_" + std::to_string(i));
  int round = 0;
  for (auto _ : state) {
    int *first = &objects[static_cast<size_t>(round++) * n];
    for (int i = 0; i < n; ++i) __register_uniquely_identifiable_object(first + i, ids[i].c_str(), "device_global");
  }
  state.counters["per_object"] = benchmark::Counter(
      static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_RegisterNew)->Arg(1000)->Arg(10000)->Iterations(kRounds)->Unit(benchmark::kMicrosecond);

// The same `n` objects registered again (a library loaded again registers its objects anew).
void BM_RegisterAgain(benchmark::State &state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<int> objects(n);
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) ids.push_back("_Z" + std::to_string(i) + "device_global_object_" + std::to_string(i));
  for (auto _ : state)
    for (int i = 0; i < n; ++i) __register_uniquely_identifiable_object(&objects[i], ids[i].c_str(), "device_global");
  state.counters["per_object"] = benchmark::Counter(
      static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_RegisterAgain)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

// The first lookup after n registrations: each address's host object found (a bisection over the
// loaded objects' segments), then the lookup itself (an object no image defines: the error path).
void BM_FirstLookupAfterRegistering(benchmark::State &state) {
  const int n = static_cast<int>(state.range(0));
  static std::vector<int> objects(10000);
  void *global = device_dlopen(nullptr, DEVDL_LAZY);
  int value = 0;
  for (auto _ : state) {
    state.PauseTiming();
    for (int i = 0; i < n; ++i) device_dlregister(&objects[i], "uid", "device_global");
    state.ResumeTiming();
    benchmark::DoNotOptimize(device_dlread_object(global, &objects[0], 0, &value, sizeof value));
  }
}
BENCHMARK(BM_FirstLookupAfterRegistering)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
