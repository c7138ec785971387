// Writes a synthetic bundle for measurements: IMAGES SPIR-V images with SYMBOLS symbols each
// (a kernel, exported functions, a variable and imports), recorded under devdl's keys.
//   devdl_make_bundle OUT IMAGES SYMBOLS
#include "image/read_image.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

int main(int argc, char **argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: devdl_make_bundle OUT IMAGES SYMBOLS\n");
    return 2;
  }
  const long numImages = std::atol(argv[2]), numSymbols = std::atol(argv[3]);
  // The smallest valid SPIR-V module: a header. Its bytes are not read when the keys are there.
  static const uint32_t header[5] = {0x07230203, 0x00010000, 0, 1, 0};
  auto storage = std::make_shared<devdl::Storage>();
  std::vector<devdl::DeviceImage> images(numImages);
  for (long i = 0; i < numImages; ++i) {
    devdl::DeviceImage &image = images[i];
    image.format = devdl::ImageFormat::SpirV;
    image.triple = "spir64-unknown-unknown";
    image.bytes = devdl::Bytes(reinterpret_cast<const uint8_t *>(header), sizeof header);
    image.storage = storage;
    for (long s = 0; s < numSymbols; ++s) {
      const std::string name = "image" + std::to_string(i) + "_symbol" + std::to_string(s);
      const devdl::SymbolKind kind = s == 0 ? devdl::SymbolKind::Kernel
                                     : s % 10 == 1 ? devdl::SymbolKind::Variable
                                     : s % 4 == 3  ? devdl::SymbolKind::Import
                                                   : devdl::SymbolKind::Function;
      image.symbols.push_back({storage->save(name), kind});
    }
  }
  const std::string bundle = devdl::packImages(images);
  std::ofstream(argv[1], std::ios::binary).write(bundle.data(), static_cast<std::streamsize>(bundle.size()));
  std::printf("%s: %ld images, %ld symbols, %zu bytes\n", argv[1], numImages, numImages * numSymbols, bundle.size());
  return 0;
}
