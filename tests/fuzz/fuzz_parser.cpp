// One libFuzzer target per parser, selected at build time by DEVDL_FUZZ_PARSER. Every input
// must be read or refused with an error: no crash, no out-of-bounds read (ASan), no leak. The
// SPIR-V, device ELF and PTX targets also make the input's definitions local, as interposition
// does to a copy it links (image/local_definitions.h).
#include "bundle/host_elf.h"
#include "cache/disk_cache.h"
#include "image/local_definitions.h"
#include "image/read_image.h"
#include "image/readers.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <vector>

namespace {

enum Parser { SpirV, DeviceElf, Ptx, Fatbin, Bitcode, Bundle, HostElf, AnyFile, CacheEntry };

// A disk cache entry as a file under the key "fuzz" (tests/data/fuzz-seeds has a valid
// one to start from), then looked up and listed as devdl and devdl-cache do.
void readCacheEntry(devdl::Bytes bytes) {
  using namespace devdl::cache;
  static const std::string dir = [] {
    char name[] = "/tmp/devdl-fuzz-cache-XXXXXX";
    return std::string(mkdtemp(name));
  }();
  static const Key key = KeyBuilder().add("fuzz").finish();
  const std::string path = dir + "/" + key.hex() + ".devdl-cache";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) std::abort();
  close(fd);
  DiskCache cache(dir, uint64_t(1) << 30);
  if (!cache.list()) std::abort();  // the directory is there and readable
  cache.load(key);
}

// Reads an image of `format`, then makes its definitions local in a copy (a name it does not
// define where it has none): the edit parses the bytes itself, read or not.
llvm::Error readAndHide(devdl::Bytes bytes, devdl::ImageFormat format, std::shared_ptr<devdl::Storage> storage) {
  using namespace devdl;
  auto image = readRawImage(bytes, format, std::move(storage));
  std::vector<std::string_view> names{"f"};
  if (image)
    for (const Symbol &s : image->symbols)
      if (s.kind == SymbolKind::Function || s.kind == SymbolKind::Variable) names.push_back(s.name);
  llvm::consumeError(withLocalDefinitions(bytes, format, names).takeError());
  return image.takeError();
}

llvm::Error parse(devdl::Bytes bytes) {
  using namespace devdl;
  auto storage = std::make_shared<Storage>();
  switch (Parser::DEVDL_FUZZ_PARSER) {
    case SpirV: return readAndHide(bytes, ImageFormat::SpirV, storage);
    case DeviceElf: return readAndHide(bytes, ImageFormat::Cubin, storage);
    case Ptx: return readAndHide(bytes, ImageFormat::Ptx, storage);
    case Fatbin:
      llvm::consumeError(readers::splitFatbins(bytes).takeError());
      return readRawImage(bytes, ImageFormat::Fatbin, storage).takeError();
    case Bitcode: return readRawImage(bytes, ImageFormat::SpirBitcode, storage).takeError();
    case Bundle: return readBundleImages(bytes, storage).takeError();
    case HostElf: return bundle::findBundlesInElf(bytes).takeError();
    case AnyFile: return readImageMemory(bytes, "fuzz", storage).takeError();
    case CacheEntry: readCacheEntry(bytes); return llvm::Error::success();
  }
  return llvm::Error::success();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::consumeError(parse(devdl::Bytes(data, size)));
  return 0;
}
