// Reading bundles: the cost should follow what is read. BM_ReadBundle reads every image's
// envelope and symbol lists (what devdl-nm does); BM_ReadEnvelopes only the envelopes (what
// finding one image costs before its lists are split). Both against the bundle's size.
#include "bundle/offload_binary.h"
#include "image/read_image.h"
#include "synthetic_bundle.h"

#include <benchmark/benchmark.h>

namespace {

void BM_ReadBundle(benchmark::State &state) {
  const std::string bundle = devdl::bench::syntheticBundle(static_cast<int>(state.range(0)), 100);
  for (auto _ : state) {
    auto images = devdl::readBundleImages(devdl::asBytes(bundle), nullptr);
    if (!images) state.SkipWithError(llvm::toString(images.takeError()).c_str());
    benchmark::DoNotOptimize(images->data());
  }
  state.counters["images"] = static_cast<double>(state.range(0));
  state.counters["symbols/s"] = benchmark::Counter(static_cast<double>(state.range(0) * 100),
                                                   benchmark::Counter::kIsIterationInvariantRate);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bundle.size()));
}
BENCHMARK(BM_ReadBundle)->RangeMultiplier(10)->Range(10, 10000)->Unit(benchmark::kMicrosecond);

void BM_ReadEnvelopes(benchmark::State &state) {
  const std::string bundle = devdl::bench::syntheticBundle(static_cast<int>(state.range(0)), 100);
  for (auto _ : state) {
    auto entries = devdl::bundle::readBundle(devdl::asBytes(bundle));
    if (!entries) state.SkipWithError(llvm::toString(entries.takeError()).c_str());
    benchmark::DoNotOptimize(entries->data());
  }
  state.counters["images"] = static_cast<double>(state.range(0));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bundle.size()));
}
BENCHMARK(BM_ReadEnvelopes)->RangeMultiplier(10)->Range(10, 10000)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
