// Synthetic bundles for measurements: `images` SPIR-V images with `symbols` recorded symbols
// each, named <prefix><image>_<n>. With `mixed`, the first symbol of each image is a kernel,
// every 10th a variable, every 4th an import, the rest functions; without, all are exported
// functions. The image bytes are a bare SPIR-V header: with the symbols recorded, nothing reads
// them until a link.
#pragma once

#include "image/read_image.h"

#include <string>
#include <string_view>
#include <vector>

namespace devdl::bench {

inline std::string syntheticBundle(int images, int symbols, std::string_view prefix = "image", bool mixed = true) {
  static const uint32_t header[5] = {0x07230203, 0x00010000, 0, 1, 0};
  auto storage = std::make_shared<Storage>();
  std::vector<DeviceImage> list(images);
  for (int i = 0; i < images; ++i) {
    DeviceImage &image = list[i];
    image.format = ImageFormat::SpirV;
    image.triple = "spir64-unknown-unknown";
    image.bytes = Bytes(reinterpret_cast<const uint8_t *>(header), sizeof header);
    image.storage = storage;
    for (int s = 0; s < symbols; ++s) {
      const SymbolKind kind = !mixed        ? SymbolKind::Function
                              : s == 0      ? SymbolKind::Kernel
                              : s % 10 == 1 ? SymbolKind::Variable
                              : s % 4 == 3  ? SymbolKind::Import
                                            : SymbolKind::Function;
      image.symbols.push_back(
          {storage->save(std::string(prefix) + std::to_string(i) + "_" + std::to_string(s)), kind});
    }
  }
  return packImages(list);
}

}  // namespace devdl::bench
