// CUDA runtime programs whose device code is in a shared library, linked at load time by devdl
// (issue 55), side by side with the same program device-linked statically by nvcc, in one run on
// the GPU. The program (bench/cuda_runtime) launches, with <<<>>>, a kernel calling the library's
// __device__ function in a loop.
//
//   BM_StartToFirstKernel/<cold|cached>   from posix_spawn to the end of the first kernel, in fresh
//                                         processes (manual time: devdl's), each iteration running
//                                         both programs in turns; counters: static_ms, devdl_ms and
//                                         ratio (goal for cached: 1.10 at most). cold: an empty disk
//                                         cache each time; cached: one the first run filled.
//   BM_KernelTime/<rdc|lto>               the kernel's median time over 21 launches of a long loop;
//                                         lto: both built with -dlto (goal: ratio 1.01 at most, the
//                                         library's function inlined as nvcc -dlink -dlto does)
//
// DEVDL_BENCH_PROGRAMS names the directory with the four programs: first_kernel_static,
// first_kernel_static_lto (nvcc, built there by scripts/gpu-run.sh), bench_first_kernel_devdl and
// bench_first_kernel_devdl_lto (with their libraries beside them).
#include "child_process.h"

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace {

using devdl::bench::runProgram;

std::string program(const std::string &name) {
  const char *dir = std::getenv("DEVDL_BENCH_PROGRAMS");
  return std::string(dir ? dir : ".") + "/" + name;
}

// One run of `name`: the first number it printed (nanoseconds to its first kernel) and its fields.
bool runOnce(benchmark::State &state, const std::string &name, const std::vector<std::string> &args,
             const std::vector<std::string> &env, double &nanoseconds, std::map<std::string, double> &fields) {
  std::string error;
  nanoseconds = runProgram(program(name), args, env, &error, &fields);
  if (nanoseconds >= 0) return true;
  state.SkipWithError(error.c_str());
  return false;
}

void BM_StartToFirstKernel(benchmark::State &state, bool cached) {
  const std::string cacheRoot = std::filesystem::temp_directory_path() / "devdl-bench-cuda-runtime";
  std::filesystem::remove_all(cacheRoot);
  const std::string warm = cacheRoot + "/warm";
  std::vector<std::string> devdlEnv = {"DEVDL_CACHE_DIR=" + warm};
  std::map<std::string, double> fields;
  double ns = 0;
  if (cached && !runOnce(state, "bench_first_kernel_devdl", {}, devdlEnv, ns, fields)) return;
  double staticTotal = 0, devdlTotal = 0;
  int64_t iteration = 0;
  for (auto _ : state) {
    if (!cached) devdlEnv = {"DEVDL_CACHE_DIR=" + cacheRoot + "/cold" + std::to_string(iteration)};
    double staticNs = 0, devdlNs = 0;
    // In turns: the machine drifts more between runs than the programs differ.
    const bool devdlFirst = iteration++ % 2 == 0;
    for (int turn = 0; turn < 2; ++turn)
      if ((turn == 0) == devdlFirst ? !runOnce(state, "bench_first_kernel_devdl", {}, devdlEnv, devdlNs, fields)
                                    : !runOnce(state, "first_kernel_static", {}, {}, staticNs, fields))
        return;
    state.SetIterationTime(devdlNs / 1e9);
    staticTotal += staticNs / 1e6;
    devdlTotal += devdlNs / 1e6;
  }
  std::filesystem::remove_all(cacheRoot);
  state.counters["static_ms"] = benchmark::Counter(staticTotal, benchmark::Counter::kAvgIterations);
  state.counters["devdl_ms"] = benchmark::Counter(devdlTotal, benchmark::Counter::kAvgIterations);
  state.counters["ratio"] = staticTotal > 0 ? devdlTotal / staticTotal : 0;
}

void BM_KernelTime(benchmark::State &state, bool lto) {
  const std::string suffix = lto ? "_lto" : "";
  double staticTotal = 0, devdlTotal = 0;
  for (auto _ : state) {
    std::map<std::string, double> staticFields, devdlFields;
    double ns = 0;
    if (!runOnce(state, "first_kernel_static" + suffix, {"--kernel-time"}, {"DEVDL_CACHE=0"}, ns, staticFields) ||
        !runOnce(state, "bench_first_kernel_devdl" + suffix, {"--kernel-time"}, {"DEVDL_CACHE=0"}, ns, devdlFields))
      return;
    state.SetIterationTime(devdlFields["kernel_ms"] / 1e3);
    staticTotal += staticFields["kernel_ms"];
    devdlTotal += devdlFields["kernel_ms"];
  }
  state.counters["static_ms"] = benchmark::Counter(staticTotal, benchmark::Counter::kAvgIterations);
  state.counters["devdl_ms"] = benchmark::Counter(devdlTotal, benchmark::Counter::kAvgIterations);
  state.counters["ratio"] = staticTotal > 0 ? devdlTotal / staticTotal : 0;
}

BENCHMARK_CAPTURE(BM_StartToFirstKernel, cold, false)->UseManualTime()->Iterations(10)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StartToFirstKernel, cached, true)->UseManualTime()->Iterations(20)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelTime, rdc, false)->UseManualTime()->Iterations(5)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_KernelTime, lto, true)->UseManualTime()->Iterations(5)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
