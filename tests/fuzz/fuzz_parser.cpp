// One libFuzzer target per parser, selected at build time by DEVDL_FUZZ_PARSER. Every input
// must be read or refused with an error: no crash, no out-of-bounds read (ASan), no leak.
#include "bundle/host_elf.h"
#include "image/read_image.h"
#include "image/readers.h"

#include <cstddef>
#include <cstdint>

namespace {

enum Parser { SpirV, DeviceElf, Ptx, Fatbin, Bitcode, Bundle, HostElf, AnyFile };

llvm::Error parse(devdl::Bytes bytes) {
  using namespace devdl;
  auto storage = std::make_shared<Storage>();
  switch (Parser::DEVDL_FUZZ_PARSER) {
    case SpirV: return readRawImage(bytes, ImageFormat::SpirV, storage).takeError();
    case DeviceElf: return readRawImage(bytes, ImageFormat::Cubin, storage).takeError();
    case Ptx: return readRawImage(bytes, ImageFormat::Ptx, storage).takeError();
    case Fatbin:
      llvm::consumeError(readers::splitFatbins(bytes).takeError());
      return readRawImage(bytes, ImageFormat::Fatbin, storage).takeError();
    case Bitcode: return readRawImage(bytes, ImageFormat::SpirBitcode, storage).takeError();
    case Bundle: return readBundleImages(bytes, storage).takeError();
    case HostElf: return bundle::findBundlesInElf(bytes).takeError();
    case AnyFile: return readImageMemory(bytes, "fuzz", storage).takeError();
  }
  return llvm::Error::success();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::consumeError(parse(devdl::Bytes(data, size)));
  return 0;
}
