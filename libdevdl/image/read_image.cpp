#include "image/read_image.h"

#include "bundle/host_elf.h"
#include "bundle/offload_binary.h"
#include "image/bundle_entries.h"
#include "image/readers.h"
#include "support/error.h"
#include "support/xxh3.h"

#include <llvm/BinaryFormat/ELF.h>
#include <llvm/Support/Endian.h>

#include <deque>
#include <map>

namespace devdl {

namespace {

// Either byte order: the magic number tells which (the reader turns the other into this host's).
bool isSpirv(Bytes b) {
  return b.size() >= 4 && (llvm::support::endian::read32le(b.data()) == 0x07230203 ||
                           llvm::support::endian::read32be(b.data()) == 0x07230203);
}
bool isBitcode(Bytes b) {
  if (b.size() < 4) return false;
  uint32_t magic = llvm::support::endian::read32le(b.data());
  return magic == 0xdec04342 /* 'BC' 0xC0DE */ || magic == 0x0b17c0de /* wrapper */;
}
bool isFatbin(Bytes b) { return b.size() >= 4 && llvm::support::endian::read32le(b.data()) == 0xBA55ED50; }
bool isLtoIr(Bytes b) { return b.size() >= 4 && llvm::support::endian::read32le(b.data()) == 0x7F4E43ED; }
bool isPtx(Bytes b) {
  // PTX is text whose first directive is .version, after comments.
  std::string_view text = asText(b.subspan(0, std::min<size_t>(b.size(), 4096)));
  size_t pos = 0;
  while (pos < text.size()) {
    if (std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
    else if (text.substr(pos, 2) == "//") pos = std::min(text.find('\n', pos), text.size());
    else if (text.substr(pos, 2) == "/*") pos = std::min(text.find("*/", pos + 2), text.size() - 2) + 2;
    else return text.substr(pos).starts_with(".version");
  }
  return false;
}
bool isDeviceElf(Bytes b) {
  if (!bundle::isElf(b) || b.size() < 20) return false;
  uint16_t machine = llvm::support::endian::read16le(b.data() + 18);
  return machine == llvm::ELF::EM_CUDA || machine == llvm::ELF::EM_AMDGPU;
}

// DPC++'s images: its offload wrapper's tables, looked for where its images are (other host files'
// symbol tables are not read); none where it has none.
llvm::Expected<std::vector<DeviceImage>> dpcppImagesOfElf(Bytes bytes, std::shared_ptr<Storage> storage,
                                                         UnreadableImages *past = nullptr) {
  auto sections = bundle::findDpcppImageSectionsInElf(bytes);
  if (!sections) return sections.takeError();
  if (sections->empty()) return std::vector<DeviceImage>();
  return readers::readSyclOffloadImages(bytes, std::move(storage), past);
}

// The fat binaries of nvcc's sections, each an image, after `images`.
llvm::Error addFatbinImages(std::span<const Bytes> sections, const std::shared_ptr<Storage> &storage,
                            std::vector<DeviceImage> &images, UnreadableImages *past) {
  for (Bytes section : sections) {
    auto fatbins = readers::splitFatbins(section);
    if (!fatbins) return fatbins.takeError();
    for (Bytes fatbin : *fatbins) {
      auto image = readRawImage(fatbin, ImageFormat::Fatbin, storage);
      if (image) images.push_back(std::move(*image));
      else if (llvm::Error err = readers::readPast(inImage(image.takeError(), "image " + std::to_string(images.size())),
                                                   images, storage, past))
        return err;
    }
  }
  return llvm::Error::success();
}

// A regular file's bytes, read into a storage of their own.
llvm::Expected<std::shared_ptr<Storage>> readIntoStorage(const RegularFile &file) {
  auto buffer = file.read();
  if (!buffer) return buffer.takeError();
  return std::make_shared<Storage>(std::move(*buffer));
}

llvm::Expected<std::vector<DeviceImage>> imagesOfElf(Bytes bytes, std::shared_ptr<Storage> storage,
                                                     UnreadableImages *past) {
  const bool intel = readers::isIntelNative(bytes);
  if (intel || isDeviceElf(bytes)) {
    // The ELF reader tells Cubin from others.
    auto image = readRawImage(bytes, intel ? ImageFormat::IntelNative : ImageFormat::Cubin, storage);
    if (!image) return inImage(image.takeError(), "image 0");
    std::vector<DeviceImage> images;
    images.push_back(std::move(*image));
    return images;
  }
  auto bundles = bundle::findBundlesInElf(bytes);
  if (!bundles) return bundles.takeError();
  // nvcc's own carriage of device code: fat binaries in sections of their own.
  auto fatbinSections = bundle::findCudaFatbinSectionsInElf(bytes);
  if (!fatbinSections) return fatbinSections.takeError();
  auto sycl = dpcppImagesOfElf(bytes, storage, past);
  if (!sycl) return sycl.takeError();
  if (bundles->empty() && fatbinSections->empty() && sycl->empty())
    return fail(ErrorCode::BadFormat, "host ELF file carries no device images (no " +
                                          llvm::Twine(bundle::kSectionName) +
                                          ", .nv_fatbin or __nv_relfatbin section, nor DPC++'s offload descriptor)");
  std::vector<DeviceImage> images = std::move(*sycl);
  for (Bytes b : *bundles) {
    UnreadableImages bundlePast;  // by index in the bundle
    auto more = readBundleImages(b, storage, past ? &bundlePast : nullptr);
    if (!more) return more.takeError();
    for (auto &[index, why] : bundlePast) past->emplace_back(images.size() + index, std::move(why));
    for (auto &image : *more) images.push_back(std::move(image));
  }
  if (llvm::Error err = addFatbinImages(*fatbinSections, storage, images, past)) return err;
  return images;
}

}  // namespace

ImageFormat sniffFormat(Bytes bytes) {
  if (isSpirv(bytes)) return ImageFormat::SpirV;
  if (isBitcode(bytes)) return ImageFormat::SpirBitcode;
  if (isFatbin(bytes)) return ImageFormat::Fatbin;
  if (isLtoIr(bytes)) return ImageFormat::LtoIr;
  if (readers::isIntelNative(bytes)) return ImageFormat::IntelNative;
  if (isDeviceElf(bytes)) return ImageFormat::Cubin;
  if (isPtx(bytes)) return ImageFormat::Ptx;
  return ImageFormat::Unknown;
}

namespace readers {

llvm::Error derive(DeviceImage &image) {
  switch (image.format) {
    case ImageFormat::SpirV: return readSpirv(image);
    case ImageFormat::SpirBitcode: return readBitcode(image);
    case ImageFormat::Cubin:
    case ImageFormat::DeviceElf: return readDeviceElf(image);
    case ImageFormat::Ptx: return readPtx(image);
    case ImageFormat::Fatbin: return readFatbin(image);
    case ImageFormat::IntelNative: return readIntelNative(image);
    case ImageFormat::OpenClBinary:
      return fail(ErrorCode::Unsupported, "a native OpenCL binary has no symbol table devdl can read: pack it with "
                                          "devdl-pack --opencl-binary-of (the image it was compiled from)");
    case ImageFormat::LtoIr: {
      // Its header (read off nvcc 13 output) records the target as a u16 at offset 26: 900 for lto_90.
      const std::string arch = image.bytes.size() >= 28
                                   ? "lto_" + std::to_string(llvm::support::endian::read16le(image.bytes.data() + 26) / 10)
                                   : "LTO-IR";
      return fail(ErrorCode::Unsupported,
                  arch + " alone: its symbols are in NVIDIA's encoding, which devdl does not read; link it from "
                         "the fat binary nvcc -rdc=true -dlto -arch=sm_NN -fatbin writes, which puts PTX beside it");
    }
    case ImageFormat::Unknown: break;
  }
  return fail(ErrorCode::Unsupported, "unknown image format");
}

}  // namespace readers

llvm::Expected<DeviceImage> readRawImage(Bytes bytes, ImageFormat format, std::shared_ptr<Storage> storage) {
  if (!storage) storage = std::make_shared<Storage>();
  DeviceImage image;
  image.format = format;
  image.bytes = bytes;
  image.storage = std::move(storage);
  if (bytes.empty()) return fail(ErrorCode::BadFormat, "empty image");
  if (llvm::Error err = readers::derive(image)) return err;
  image.checked = true;
  return image;
}

llvm::Expected<DeviceImage> readUnread(const DeviceImage &image) {
  UnreadFiles files;
  return readUnread(image, files);
}

llvm::Expected<DeviceImage> readUnread(const DeviceImage &image, UnreadFiles &files) {
  const DeviceImage::Unread &unread = *image.unread;
  auto known = files.find(unread.file.get());
  std::string unreadable;  // why the file cannot be read now, where it cannot
  if (known == files.end()) {
    auto file = readImageFile(*unread.file);
    if (file) known = files.emplace(unread.file.get(), std::move(*file)).first;
    else unreadable = llvm::toString(file.takeError());
  }
  const bool same = known != files.end() && unread.index < known->second.images.size() && [&] {
    const Bytes bytes = known->second.images[unread.index].bytes;
    const xxh3::Hash128 hash = xxh3::hash128(bytes.data(), bytes.size());
    return hash.low == unread.hashLow && hash.high == unread.hashHigh;
  }();
  // Named by the caller, as the image it links ("lib.spv: image 0 (spirv)"). The file had the
  // summary's bytes when it was opened: whatever it reads as now, it changed.
  if (!same)
    return fail(ErrorCode::Io, "the file changed since it was opened, and its bytes then were not kept: the image "
                               "was known from the file's summary in the disk cache" +
                                   (unreadable.empty() ? std::string() : " (it reads now as: " + unreadable + ")"));
  return known->second.images[unread.index];  // a copy, sharing the file's storage
}

llvm::Expected<std::optional<DeviceImage>> checkImage(const DeviceImage &image) {
  if (image.checked || image.format == ImageFormat::OpenClBinary) return std::nullopt;
  auto read = readRawImage(image.bytes, image.format, nullptr);
  if (!read) return read.takeError();
  return std::optional<DeviceImage>(std::move(*read));
}

llvm::Expected<std::vector<DeviceImage>> readBundleImages(Bytes bytes, std::shared_ptr<Storage> storage,
                                                          UnreadableImages *past) {
  if (!storage) storage = std::make_shared<Storage>();  // one for all the images
  auto entries = bundle::readBundle(bytes);
  if (!entries) return entries.takeError();
  std::vector<DeviceImage> images;
  images.reserve(entries->size());
  for (const bundle::Entry &entry : *entries) {
    auto image = imageOfEntry(entry, storage);
    if (image) images.push_back(std::move(*image));
    else if (llvm::Error err = readers::readPast(inImage(image.takeError(), "image " + std::to_string(images.size()) +
                                                                       " (at offset " + std::to_string(entry.offset) + ")"),
                                        images, storage, past))
      return err;
  }
  return images;
}

std::string packImages(const std::vector<DeviceImage> &images) {
  std::deque<std::string> owned;  // what the entries' strings point into, alive until written
  std::vector<bundle::Entry> entries;
  for (const DeviceImage &image : images) entries.push_back(entryOfImage(image, owned));
  std::string out;
  bundle::writeBundle(entries, out);
  return out;
}

llvm::Expected<ImageFile> readImageMemory(Bytes bytes, std::string name, std::shared_ptr<Storage> storage,
                                          bool listing) {
  ImageFile file{std::move(name), {}, {}};
  if (!storage) storage = std::make_shared<Storage>();  // one for all the images
  UnreadableImages *past = listing ? &file.unreadable : nullptr;
  auto result = [&]() -> llvm::Expected<std::vector<DeviceImage>> {
    if (bytes.empty()) return fail(ErrorCode::BadFormat, "empty file");
    if (bundle::isBundle(bytes)) return readBundleImages(bytes, storage, past);
    if (bundle::isElf(bytes)) return imagesOfElf(bytes, storage, past);
    ImageFormat format = sniffFormat(bytes);
    if (format == ImageFormat::Unknown)
      return fail(ErrorCode::BadFormat,
                  "not a device image, bundle or ELF file (unknown format)");
    auto image = readRawImage(bytes, format, storage);
    if (!image) return inImage(image.takeError(), "image 0 (" + std::string(formatName(format)) + ")");
    std::vector<DeviceImage> images;
    images.push_back(std::move(*image));
    return images;
  }();
  if (!result) return inFile(result.takeError(), file.name);
  file.images = std::move(*result);
  return file;
}

llvm::Expected<ImageFile> readImageFile(const std::string &path, bool listing) {
  auto file = RegularFile::open(path);
  if (!file) return file.takeError();
  return readImageFile(*file, listing);
}

llvm::Expected<std::vector<DeviceImage>> readDpcppImagesOfFile(const std::string &path) {
  auto file = RegularFile::open(path);
  if (!file) return file.takeError();
  auto storage = readIntoStorage(*file);
  if (!storage) return storage.takeError();
  const Bytes bytes = (*storage)->bytes();
  auto images = dpcppImagesOfElf(bytes, std::move(*storage));
  if (!images) return inFile(images.takeError(), path);
  return images;
}

llvm::Expected<std::vector<DeviceImage>> readCudaObjectImagesOfFile(const std::string &path) {
  auto file = RegularFile::open(path);
  if (!file) return file.takeError();
  auto storage = readIntoStorage(*file);
  if (!storage) return storage.takeError();
  auto sections = bundle::findRelocatableFatbinSectionsInElf((*storage)->bytes());
  if (!sections) return inFile(sections.takeError(), path);
  std::vector<DeviceImage> images;
  if (llvm::Error err = addFatbinImages(*sections, *storage, images, nullptr)) return inFile(std::move(err), path);
  return images;
}

llvm::Expected<ImageFile> readImageFile(const RegularFile &file, bool listing) {
  auto storage = readIntoStorage(file);
  if (!storage) return storage.takeError();
  const Bytes bytes = (*storage)->bytes();
  return readImageMemory(bytes, file.path(), std::move(*storage), listing);
}

llvm::Error readers::readPast(llvm::Error err, std::vector<DeviceImage> &images, std::shared_ptr<Storage> storage,
                               std::vector<std::pair<size_t, std::string>> *past) {
  if (!past) return err;
  past->emplace_back(images.size(), llvm::toString(std::move(err)));
  images.emplace_back().storage = std::move(storage);
  return llvm::Error::success();
}

}  // namespace devdl
