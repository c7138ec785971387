// Reading bundles: the cost should follow what is read. BM_ReadBundle reads every image's
// envelope and symbol lists (what devdl-nm does); BM_ReadEnvelopes only the envelopes (what
// finding one image costs before its lists are split). Both against the bundle's size.
#include "bundle/offload_binary.h"
#include "image/read_image.h"

#include <benchmark/benchmark.h>

namespace {

std::string makeBundle(int numImages, int symbolsPerImage) {
  static const uint32_t header[5] = {0x07230203, 0x00010000, 0, 1, 0};
  auto storage = std::make_shared<devdl::Storage>();
  std::vector<devdl::DeviceImage> images(numImages);
  for (int i = 0; i < numImages; ++i) {
    images[i].format = devdl::ImageFormat::SpirV;
    images[i].bytes = devdl::Bytes(reinterpret_cast<const uint8_t *>(header), sizeof header);
    images[i].storage = storage;
    for (int s = 0; s < symbolsPerImage; ++s)
      images[i].symbols.push_back({storage->save("image" + std::to_string(i) + "_f" + std::to_string(s)),
                                   s % 4 == 3 ? devdl::SymbolKind::Import : devdl::SymbolKind::Function});
  }
  return devdl::packImages(images);
}

void BM_ReadBundle(benchmark::State &state) {
  const std::string bundle = makeBundle(static_cast<int>(state.range(0)), 100);
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
  const std::string bundle = makeBundle(static_cast<int>(state.range(0)), 100);
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
