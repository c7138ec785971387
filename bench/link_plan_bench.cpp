// Import closure over many images (issue 3, benchmark b): N images in a chain, each importing
// 10 functions from the next, resolved through the SymbolIndex. Reported per import visited.
#include "resolve/link_plan.h"
#include "resolve/symbol_index.h"

#include <benchmark/benchmark.h>

#include <deque>
#include <string>

namespace {

constexpr int kImportsPerImage = 10;

void BM_LinkPlanChain(benchmark::State &state) {
  const int n = static_cast<int>(state.range(0));
  std::deque<std::string> names;
  std::vector<devdl::DeviceImage> images(n);
  for (int i = 0; i < n; ++i) {
    images[i].format = devdl::ImageFormat::SpirV;
    for (int s = 0; s < kImportsPerImage; ++s) {
      const std::string &own = names.emplace_back("f" + std::to_string(i) + "_" + std::to_string(s));
      images[i].symbols.push_back({own, devdl::SymbolKind::Function});
      if (i + 1 < n) {
        const std::string &next = names.emplace_back("f" + std::to_string(i + 1) + "_" + std::to_string(s));
        images[i].symbols.push_back({next, devdl::SymbolKind::Import});
      }
    }
  }
  std::vector<const devdl::DeviceImage *> pointers;
  devdl::SymbolIndex index;
  for (int i = 0; i < n; ++i) {
    pointers.push_back(&images[i]);
    index.add(images[i], static_cast<uint32_t>(i));
  }
  const uint32_t root = 0;
  size_t imports = 0;
  for (auto _ : state) {
    devdl::LinkPlan plan = devdl::computeLinkPlan(
        std::span(&root, 1), pointers, [&](std::string_view name, uint32_t) -> std::optional<uint32_t> {
          if (const devdl::Definition *d = index.find(name, devdl::LinkFamily::Spirv)) return d->image;
          return std::nullopt;
        });
    imports = plan.bindings.size();
    benchmark::DoNotOptimize(plan.images.data());
  }
  state.counters["imports"] = static_cast<double>(imports);
  state.counters["per_import"] = benchmark::Counter(static_cast<double>(imports),
                                                    benchmark::Counter::kIsIterationInvariantRate |
                                                        benchmark::Counter::kInvert);
}
BENCHMARK(BM_LinkPlanChain)->RangeMultiplier(10)->Range(10, 10000)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
