// DPC++'s own carriage of device images in a host ELF file (seed 004): the offload wrapper's
// tables, which the file's constructor hands to the SYCL runtime (__sycl_register_lib). A
// descriptor (.sycl_offloading.descriptor, a local symbol) points to an array of device binaries,
// each with its target, its image (SPIR-V, maybe zstd-compressed), its kernels and its property
// sets. Every pointer is a link-time address that an R_X86_64_RELATIVE relocation fills at load
// time: its addend is the address, which is read through the file's PT_LOAD segments.
//
// Layouts, as DPC++ 2025 and later write them (version 3 of a device binary, 80 bytes):
//   descriptor      u16 version (1), u16 count, pad, ptr binaries, ptr host entries begin, end
//   device binary   u16 version (3), u8 kind (4: SYCL), u8 format, pad, ptr target, compile
//                   options, link options, image begin, end, entries begin, end, property sets
//                   begin, end
//   entry           ptr address, ptr name, u64 size, i32 flags, i32 reserved (32 bytes)
//   property set    ptr name, ptr begin, ptr end (24 bytes)
//   property        ptr name, ptr value, u32 type, pad, u64 size (32 bytes): a uint32's value
//                   is its size; a byte array's value starts with its length in bits (u64)
#include "image/read_image.h"
#include "image/readers.h"
#include "support/error.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/Object/ELF.h>
#include <llvm/Support/Endian.h>

#include <zstd.h>

namespace devdl::readers {

namespace {

constexpr uint64_t kMaxInflated = 256u << 20;  // what one image may inflate to
constexpr size_t kMaxString = 1 << 16;

enum Format : uint8_t { FormatNone = 0, FormatNative = 1, FormatSpirv = 2, FormatBitcode = 3, FormatZstd = 4 };

// The file's bytes at link-time addresses, and the pointers stored there.
class Addresses {
 public:
  Addresses(const llvm::object::ELF64LEFile &elf, Bytes bytes) : elf_(elf), bytes_(bytes) {}

  llvm::Error load() {
    auto segments = elf_.program_headers();
    if (!segments) return fail(ErrorCode::BadFormat, "invalid program headers: " + llvm::toString(segments.takeError()));
    for (const auto &segment : *segments)
      if (segment.p_type == llvm::ELF::PT_LOAD) segments_.push_back(segment);
    auto sections = elf_.sections();
    if (!sections) return fail(ErrorCode::BadFormat, "invalid section headers: " + llvm::toString(sections.takeError()));
    for (const auto &section : *sections) {
      if (section.sh_type != llvm::ELF::SHT_RELA) continue;
      auto relas = elf_.relas(section);
      if (!relas) return fail(ErrorCode::BadFormat, "invalid relocations: " + llvm::toString(relas.takeError()));
      for (const auto &rela : *relas)
        if (rela.getType(false) == llvm::ELF::R_X86_64_RELATIVE) relative_[rela.r_offset] = rela.r_addend;
    }
    return llvm::Error::success();
  }

  /// `size` bytes at `address`, within one segment's bytes in the file.
  llvm::Expected<Bytes> at(uint64_t address, uint64_t size) const {
    for (const auto &s : segments_)
      if (address >= s.p_vaddr && address - s.p_vaddr <= s.p_filesz && size <= s.p_filesz - (address - s.p_vaddr)) {
        const uint64_t offset = s.p_offset + (address - s.p_vaddr);
        if (offset > bytes_.size() || size > bytes_.size() - offset) break;
        return bytes_.subspan(offset, size);
      }
    return fail(ErrorCode::BadFormat, llvm::Twine(size) + " bytes at address 0x" + llvm::Twine::utohexstr(address) +
                                          " are not in the file");
  }
  llvm::Expected<uint64_t> u64(uint64_t address) const {
    auto b = at(address, 8);
    if (!b) return b.takeError();
    return llvm::support::endian::read64le(b->data());
  }
  /// The pointer stored at `address`: its relocation's addend, else the bytes as linked.
  llvm::Expected<uint64_t> pointer(uint64_t address) const {
    if (auto it = relative_.find(address); it != relative_.end()) return static_cast<uint64_t>(it->second);
    return u64(address);
  }
  llvm::Expected<std::string_view> string(uint64_t address) const {
    if (address == 0) return std::string_view();
    for (size_t length = 0; length < kMaxString; ++length) {
      auto c = at(address + length, 1);
      if (!c) return c.takeError();
      if ((*c)[0] == 0) {
        auto all = at(address, length);
        if (!all) return all.takeError();
        return asText(*all);
      }
    }
    return fail(ErrorCode::BadFormat, "no string end within " + llvm::Twine(kMaxString) + " bytes at address 0x" +
                                          llvm::Twine::utohexstr(address));
  }

 private:
  const llvm::object::ELF64LEFile &elf_;
  Bytes bytes_;
  std::vector<llvm::object::ELF64LE::Phdr> segments_;
  llvm::DenseMap<uint64_t, int64_t> relative_;
};

// A device binary's property sets, added to `image`.
llvm::Error readPropertySets(const Addresses &file, uint64_t begin, uint64_t end, DeviceImage &image) {
  if (end < begin || (end - begin) % 24 != 0) return fail(ErrorCode::BadFormat, "invalid property sets");
  for (uint64_t set = begin; set < end; set += 24) {
    auto name = file.pointer(set);
    auto first = name ? file.pointer(set + 8) : name.takeError();
    auto last = first ? file.pointer(set + 16) : first.takeError();
    if (!last) return last.takeError();
    auto setName = file.string(*name);
    if (!setName) return setName.takeError();
    if (*last < *first || (*last - *first) % 32 != 0) return fail(ErrorCode::BadFormat, "invalid property set " + std::string(*setName));
    for (uint64_t p = *first; p < *last; p += 32) {
      auto propertyName = file.pointer(p);
      auto value = propertyName ? file.pointer(p + 8) : propertyName.takeError();
      auto typeAndSize = value ? file.at(p + 16, 16) : value.takeError();
      if (!typeAndSize) return typeAndSize.takeError();
      auto label = file.string(*propertyName);
      if (!label) return label.takeError();
      const uint32_t type = llvm::support::endian::read32le(typeAndSize->data());
      const uint64_t size = llvm::support::endian::read64le(typeAndSize->data() + 8);
      const std::string where = std::string(*setName) + " " + std::string(*label);
      if (type == static_cast<uint32_t>(PropertyType::UInt32)) {
        image.setProperty(*setName, *label, static_cast<uint32_t>(size));
      } else if (type == static_cast<uint32_t>(PropertyType::ByteArray)) {
        // Its length in bits first, then the bytes.
        auto bytes = size >= 8 ? file.at(*value, size) : llvm::Expected<Bytes>(fail(ErrorCode::BadFormat, "short"));
        if (!bytes) return fail(ErrorCode::BadFormat, "invalid byte array " + where + ": " + llvm::toString(bytes.takeError()));
        image.setProperty(*setName, *label, PropertyType::ByteArray, asText(bytes->subspan(8)));
      } else if (type == static_cast<uint32_t>(PropertyType::String)) {
        auto text = file.string(*value);
        if (!text) return text.takeError();
        image.setProperty(*setName, *label, PropertyType::String, *text);
      } else {
        return fail(ErrorCode::BadFormat, "property " + where + " of unknown type " + llvm::Twine(type));
      }
    }
  }
  return llvm::Error::success();
}

// The image of one device binary, read by its format's reader.
llvm::Expected<DeviceImage> readDeviceBinary(const Addresses &file, uint64_t record,
                                             const std::shared_ptr<Storage> &storage) {
  auto head = file.at(record, 8);
  if (!head) return head.takeError();
  const uint16_t version = llvm::support::endian::read16le(head->data());
  const uint8_t format = (*head)[3];
  if (version != 3)
    return fail(ErrorCode::Unsupported, "DPC++ device binary of version " + llvm::Twine(version) +
                                            " (devdl reads version 3, DPC++ 2025 and later)");
  uint64_t field[9];
  for (int i = 0; i < 9; ++i) {
    auto value = file.pointer(record + 8 + 8 * i);
    if (!value) return value.takeError();
    field[i] = *value;
  }
  const uint64_t begin = field[3], end = field[4];
  if (end < begin) return fail(ErrorCode::BadFormat, "invalid image bounds");
  auto stored = file.at(begin, end - begin);
  if (!stored) return stored.takeError();
  Bytes bytes = *stored;
  if (format == FormatZstd) {
    const uint64_t size = ZSTD_getFrameContentSize(bytes.data(), bytes.size());
    if (size >= ZSTD_CONTENTSIZE_ERROR) return fail(ErrorCode::BadFormat, "invalid zstd frame");
    if (size > kMaxInflated)
      return fail(ErrorCode::Unsupported, "inflates to " + llvm::Twine(size) + " bytes, past the bound of " +
                                              llvm::Twine(kMaxInflated));
    auto out = llvm::WritableMemoryBuffer::getNewUninitMemBuffer(size);
    if (!out) return fail(ErrorCode::Io, "no memory to inflate the image");
    const size_t got = ZSTD_decompress(out->getBufferStart(), size, bytes.data(), bytes.size());
    if (ZSTD_isError(got) || got != size) return fail(ErrorCode::BadFormat, "bad zstd data");
    bytes = storage->adopt(std::move(out));
  } else if (format != FormatNone && format != FormatSpirv && format != FormatBitcode && format != FormatNative) {
    return fail(ErrorCode::Unsupported, "DPC++ image format " + llvm::Twine(format));
  }
  const ImageFormat sniffed = sniffFormat(bytes);
  if (sniffed == ImageFormat::Unknown) return fail(ErrorCode::BadFormat, "not a device image (unknown format)");
  auto image = readRawImage(bytes, sniffed, storage);
  if (!image) return image.takeError();
  if (llvm::Error err = readPropertySets(file, field[7], field[8], *image)) return err;
  return image;
}

}  // namespace

llvm::Expected<std::vector<DeviceImage>> readSyclOffloadImages(Bytes elfBytes, std::shared_ptr<Storage> storage,
                                                               std::vector<std::pair<size_t, std::string>> *past) {
  std::vector<DeviceImage> images;
  auto elf = llvm::object::ELF64LEFile::create(asText(elfBytes));
  if (!elf) {
    llvm::consumeError(elf.takeError());
    return images;  // not a 64-bit little-endian ELF file: no DPC++ tables
  }
  auto sections = elf->sections();
  if (!sections) return fail(ErrorCode::BadFormat, "invalid section headers: " + llvm::toString(sections.takeError()));
  // The descriptors, by their symbol: one for each object the offload wrapper made.
  std::vector<uint64_t> descriptors;
  for (const auto &section : *sections) {
    if (section.sh_type != llvm::ELF::SHT_SYMTAB) continue;
    auto symbols = elf->symbols(&section);
    auto names = symbols ? elf->getStringTableForSymtab(section) : llvm::Expected<llvm::StringRef>(symbols.takeError());
    if (!names) return fail(ErrorCode::BadFormat, "invalid symbol table: " + llvm::toString(names.takeError()));
    for (const auto &symbol : *symbols) {
      auto name = symbol.getName(*names);
      if (name && *name == ".sycl_offloading.descriptor") descriptors.push_back(symbol.st_value);
      else if (!name) llvm::consumeError(name.takeError());
    }
  }
  if (descriptors.empty()) return images;
  Addresses file(*elf, elfBytes);
  if (llvm::Error err = file.load()) return err;
  for (uint64_t descriptor : descriptors) {
    auto head = file.at(descriptor, 8);
    auto binaries = head ? file.pointer(descriptor + 8) : head.takeError();
    if (!binaries)
      return fail(ErrorCode::BadFormat, "DPC++ descriptor at 0x" + llvm::Twine::utohexstr(descriptor) + ": " +
                                            llvm::toString(binaries.takeError()));
    const uint16_t version = llvm::support::endian::read16le(head->data());
    const uint16_t count = llvm::support::endian::read16le(head->data() + 2);
    if (version != 1)
      return fail(ErrorCode::Unsupported, "DPC++ descriptor at 0x" + llvm::Twine::utohexstr(descriptor) +
                                              " of version " + llvm::Twine(version) + " (devdl reads version 1)");
    for (uint16_t i = 0; i < count; ++i) {
      auto image = readDeviceBinary(file, *binaries + 80 * uint64_t(i), storage);
      if (image) images.push_back(std::move(*image));
      else if (llvm::Error err = readPast(inImage(image.takeError(), "image " + std::to_string(images.size()) + " (DPC++)"),
                                          images, storage, past))
        return err;
    }
  }
  return images;
}

}  // namespace devdl::readers
