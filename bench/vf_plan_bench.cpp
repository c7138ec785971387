// Planning a kernel's program with virtual-function sets (issue 20): 100 sets of 10 images each
// in the global scope, a kernel's image calling all 100 sets (device_dlplan: the plan alone, no
// link); beside it, the anchor: the same 1000 images without sets, the kernel importing one
// function of each by name. Synthetic SPIR-V images (a bare header: nothing reads the bytes
// until a link), judged by devdl's default device.
#include "devdl.h"
#include "image/read_image.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <vector>

namespace {

constexpr int kSets = 100, kImagesPerSet = 10;

devdl::DeviceImage spirvImage(const std::shared_ptr<devdl::Storage> &storage) {
  static const uint32_t header[5] = {0x07230203, 0x00010000, 0, 1, 0};
  devdl::DeviceImage image;
  image.format = devdl::ImageFormat::SpirV;
  image.triple = "spir64-unknown-unknown";
  image.bytes = devdl::Bytes(reinterpret_cast<const uint8_t *>(header), sizeof header);
  image.storage = storage;
  return image;
}

// The 1000 images (in sets or not) and the kernel's image, as one bundle each.
struct Bundles {
  std::string library, kernel;
};

Bundles makeBundles(bool sets) {
  auto storage = std::make_shared<devdl::Storage>();
  std::vector<devdl::DeviceImage> library;
  std::string called;
  devdl::DeviceImage kernel = spirvImage(storage);
  kernel.symbols.push_back({storage->save("Kernel"), devdl::SymbolKind::Kernel});
  for (int s = 0; s < kSets; ++s) {
    const std::string set = "S" + std::to_string(s);
    called += (s ? "," : "") + set;
    for (int i = 0; i < kImagesPerSet; ++i) {
      devdl::DeviceImage image = spirvImage(storage);
      const std::string_view name = storage->save("f" + std::to_string(s) + "_" + std::to_string(i));
      image.symbols.push_back({name, devdl::SymbolKind::Function});
      if (sets) image.setProperty(devdl::kVirtualFunctionsSet, "virtual-functions-set", devdl::PropertyType::String, set);
      else kernel.symbols.push_back({name, devdl::SymbolKind::Import});
      library.push_back(std::move(image));
    }
  }
  if (sets)
    kernel.setProperty(devdl::kVirtualFunctionsSet, "calls-virtual-functions-set", devdl::PropertyType::String, called);
  return {devdl::packImages(library), devdl::packImages(std::vector<devdl::DeviceImage>{kernel})};
}

void plan(benchmark::State &state, bool sets) {
  const Bundles bundles = makeBundles(sets);
  void *library = device_dlopen_mem(bundles.library.data(), bundles.library.size(), sets ? "sets" : "plain",
                                    DEVDL_LAZY | DEVDL_GLOBAL);
  void *kernel = device_dlopen_mem(bundles.kernel.data(), bundles.kernel.size(), sets ? "caller" : "importer",
                                   DEVDL_LAZY);
  if (!library || !kernel || !device_dlplan(kernel, "Kernel")) {
    state.SkipWithError(device_dlerror());
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(device_dlplan(kernel, "Kernel"));
  state.counters["images"] = kSets * kImagesPerSet + 1;
  device_dlclose(kernel);
  device_dlclose(library);
}

void BM_PlanCallingSets(benchmark::State &state) { plan(state, true); }
void BM_PlanImportingByName(benchmark::State &state) { plan(state, false); }
BENCHMARK(BM_PlanCallingSets)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PlanImportingByName)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
