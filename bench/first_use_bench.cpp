// The first use from many threads at once (issue 35): in a fresh process, N threads whose first
// devdl calls coincide (a barrier) each open LIB (DEVDL_LAZY | DEVDL_GLOBAL) and APP (DEVDL_LAZY)
// and look up AppKernel. The backend's device is opened once and the program built once, so N
// threads should take about what one takes; before, each opened the device, and each built the
// program again once it had waited a second.
//
//   BM_FirstUse<program>/N   wall time from the barrier to the last thread's kernel, the mean
//                            over fresh processes (manual time); "CPU s" the CPU time the
//                            process took meanwhile (a program built eight times shows there)
//
// Programs: the seed's (lib, app), and the large library's (lib_large: 96 kernels, with --cuda
// its LTO-IR fat binaries, linked with nvJitLink -lto: a build of seconds). Builds are real: no
// disk cache, and each child has a fresh PoCL cache and no CUDA JIT cache. Needs the test images:
// run from the build directory, or pass DEVDL_TEST_IMAGES=<dir>.
#include "child_process.h"
#include "devdl.h"

#include <benchmark/benchmark.h>

#include <sys/resource.h>

#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace {

using devdl::bench::runChild;
using Clock = std::chrono::steady_clock;

bool cuda = false;  // --cuda: cubins and fat binaries on the CUDA driver

std::string image(const std::string &name) {
  const char *dir = std::getenv("DEVDL_TEST_IMAGES");
  return std::string(dir ? dir : "tests/images") + "/" + name;
}

// The child: THREADS threads at a barrier, then each its first use. Prints the wall time in ns and
// the CPU time meanwhile.
int child(int argc, char **argv) {
  if (argc < 4) return std::fprintf(stderr, "usage: --child LIB APP THREADS\n"), 2;
  const int count = std::atoi(argv[3]);
  std::barrier start(count + 1);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(count);
  for (int t = 0; t < count; ++t)
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      void *app = device_dlopen(argv[1], DEVDL_LAZY | DEVDL_GLOBAL) ? device_dlopen(argv[2], DEVDL_LAZY) : nullptr;
      if (!app || !device_dlsym(app, "AppKernel")) errors[t] = device_dlerror();
    });
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  start.arrive_and_wait();
  const auto began = Clock::now();
  for (std::thread &t : threads) t.join();
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - began).count();
  getrusage(RUSAGE_SELF, &after);
  for (const std::string &error : errors)
    if (!error.empty()) return std::fprintf(stderr, "%s\n", error.c_str()), 1;
  auto seconds = [](const timeval &t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  const double cpu = seconds(after.ru_utime) + seconds(after.ru_stime) - seconds(before.ru_utime) - seconds(before.ru_stime);
  std::printf("%lld cpu=%.6f\n", static_cast<long long>(ns), cpu);
  return 0;
}

void firstUse(benchmark::State &state, std::string lib, std::string app, std::vector<std::string> env) {
  env.push_back("DEVDL_CACHE=0");
  const std::string threads = std::to_string(state.range(0));
  double cpu = 0;
  for (auto _ : state) {
    std::string error;
    std::map<std::string, double> fields;
    const double ns = runChild({image(lib), image(app), threads}, env, &error, &fields);
    if (ns < 0) {
      state.SkipWithError(error.c_str());
      return;
    }
    state.SetIterationTime(ns / 1e9);
    cpu += fields["cpu"];
  }
  state.counters["CPU s"] = cpu / static_cast<double>(state.iterations());
}

void BM_FirstUseSeed(benchmark::State &state) {
  if (cuda) firstUse(state, "lib.cubin", "app.cubin", {"DEVDL_BACKEND=cuda"});
  else firstUse(state, "lib.spv", "app.spv", {"DEVDL_BACKEND=opencl"});
}

void BM_FirstUseLargeLibrary(benchmark::State &state) {
  if (cuda)
    firstUse(state, "lib_large.lto.fatbin", "app.lto.fatbin", {"DEVDL_BACKEND=cuda", "DEVDL_CUDA_LINKER=nvjitlink"});
  else firstUse(state, "lib_large.spv", "app.spv", {"DEVDL_BACKEND=opencl"});
}

}  // namespace

int main(int argc, char **argv) {
  if (argc > 1 && std::strcmp(argv[1], "--child") == 0) return child(argc - 1, argv + 1);
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--cuda") == 0) cuda = true;
  benchmark::Initialize(&argc, argv);
  for (int threads : {1, 8}) {
    benchmark::RegisterBenchmark("BM_FirstUseSeed", BM_FirstUseSeed)
        ->Arg(threads)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->Iterations(9);
    benchmark::RegisterBenchmark("BM_FirstUseLargeLibrary", BM_FirstUseLargeLibrary)
        ->Arg(threads)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->Iterations(5);
  }
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
