// Writes a synthetic bundle for measurements (bench/synthetic_bundle.h).
//   devdl_make_bundle OUT IMAGES SYMBOLS_PER_IMAGE
#include "synthetic_bundle.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

int main(int argc, char **argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: devdl_make_bundle OUT IMAGES SYMBOLS_PER_IMAGE\n");
    return 2;
  }
  const int images = std::atoi(argv[2]), symbols = std::atoi(argv[3]);
  const std::string bundle = devdl::bench::syntheticBundle(images, symbols);
  std::ofstream(argv[1], std::ios::binary).write(bundle.data(), static_cast<std::streamsize>(bundle.size()));
  std::printf("%s: %d images, %ld symbols, %zu bytes\n", argv[1], images, long(images) * symbols, bundle.size());
  return 0;
}
