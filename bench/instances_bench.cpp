// What reaching a library's variable in another program costs a link (issue 51): an application's
// program linked with the library whose variable it holds (one_program), against the same
// program linked after the library's own kernel, which then holds the instance the application's
// program reaches through its cell (reached: the images rewritten, the cell set). Both warm: each
// iteration opens the library, links its own kernel first where the way asks (not timed), opens
// the application DEVDL_NOW (timed), and closes both. The disk cache is off. Same process, the
// ways in turns; the ratio of their medians is the reach's share.
//
//   bench_instances [--cuda]      OpenCL (OCL_ICD_VENDORS picks the device), or CUDA's PTX
//
// Needs bench_lto's images: run from the build directory, or pass DEVDL_TEST_IMAGES=<dir>.
#include "devdl.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::string format = "spv";

std::string image(const std::string &name) {
  const char *dir = std::getenv("DEVDL_TEST_IMAGES");
  return std::string(dir ? dir : "bench/images") + "/" + name + "." + format;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

// The application's open, in ms; negative where something failed (the error is devdl's).
double linkApplication(bool reached) {
  void *lib = device_dlopen(image("var_lib").c_str(), DEVDL_LAZY | DEVDL_GLOBAL);
  if (!lib || (reached && !device_dlsym(lib, "SlotsRead"))) return -1;
  const auto start = std::chrono::steady_clock::now();
  void *app = device_dlopen(image("var_app").c_str(), DEVDL_NOW);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!app) return -1;
  device_dlclose(app);
  device_dlclose(lib);
  return ms;
}

void BM_LinkReachingALibrarysVariable(benchmark::State &state) {
  setenv("DEVDL_CACHE", "0", 1);
  std::vector<double> ways[2];
  size_t turn = 0;
  for (auto _ : state) {
    double timed = 0;
    for (int k = 0; k < 2; ++k) {
      const int way = static_cast<int>((turn + k) % 2);  // a different one first each time
      const double ms = linkApplication(way == 1);
      if (ms < 0) {
        state.SkipWithError(device_dlerror());
        return;
      }
      ways[way].push_back(ms);
      if (way == 1) timed = ms;
    }
    ++turn;
    state.SetIterationTime(timed / 1e3);
  }
  state.counters["one_program_ms"] = median(ways[0]);
  state.counters["reached_ms"] = median(ways[1]);
  state.counters["reached_over_one_program"] = median(ways[1]) / median(ways[0]);
  state.SetLabel("medians of " + std::to_string(ways[0].size()) + " links each, " + format);
}

BENCHMARK(BM_LinkReachingALibrarysVariable)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(15);

}  // namespace

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--cuda") == 0) {
      format = "ptx";
      setenv("DEVDL_BACKEND", "cuda", 1);
    }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
