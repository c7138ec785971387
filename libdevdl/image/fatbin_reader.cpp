// CUDA fat binaries. The container is undocumented by NVIDIA; the layout below was read off
// nvcc 13 output and agrees with public reverse-engineering notes:
//   header (16 bytes): u32 magic 0xBA55ED50, u16 version 1, u16 header size, u64 size of entries
//   entry: u16 kind (1 PTX, 2 ELF, 8 LTO-IR), u16, u32 entry header size, u64 payload size (8-padded),
//          u32 compressed size, u32, u16 minor, u16 major, u32 arch, u32 name offset,
//          u32 name size, u64 flags, u64, u64 decompressed size; payload after the header.
// Flag 0x2000 marks NVIDIA's older LZ-style compression, 0x8000 zstd (CUDA 12.8+ default). LTO-IR
// members (nvcc -dlto) are compressed otherwise where flagged so: devdl never reads them, since
// nvJitLink takes the fat binary whole and their symbols are those of the PTX beside them.
#include "image/readers.h"
#include "support/error.h"

#include <llvm/Support/Endian.h>

#include <zstd.h>

namespace devdl::readers {

namespace {

constexpr uint32_t kFatbinMagic = 0xBA55ED50;
constexpr size_t kHeaderSize = 16, kEntryMinSize = 64;
constexpr uint16_t kKindPtx = 1, kKindElf = 2, kKindLtoIr = 8;
constexpr uint64_t kFlagLegacyCompressed = 0x2000, kFlagZstd = 0x8000;

uint16_t u16(const uint8_t *p) { return llvm::support::endian::read16le(p); }
uint32_t u32(const uint8_t *p) { return llvm::support::endian::read32le(p); }
uint64_t u64(const uint8_t *p) { return llvm::support::endian::read64le(p); }

}  // namespace

bool FatbinMember::readable() const {
  return format != ImageFormat::LtoIr && ((flags & kFlagZstd) || !(flags & kFlagLegacyCompressed));
}

llvm::Expected<std::vector<FatbinMember>> listFatbinMembers(Bytes fatbin, Storage &storage) {
  if (fatbin.size() < kHeaderSize || u32(fatbin.data()) != kFatbinMagic)
    return fail(ErrorCode::BadFormat, "invalid fatbin: bad magic or truncated header");
  const uint16_t headerSize = u16(fatbin.data() + 6);
  const uint64_t bodySize = u64(fatbin.data() + 8);
  if (headerSize < kHeaderSize || headerSize > fatbin.size() ||
      bodySize > fatbin.size() - headerSize)
    return fail(ErrorCode::BadFormat, "invalid fatbin: size " + llvm::Twine(bodySize) +
                                          " runs past the end of the " + llvm::Twine(fatbin.size()) +
                                          "-byte file");
  std::vector<FatbinMember> members;
  const uint8_t *body = fatbin.data() + headerSize;
  uint64_t pos = 0;
  while (pos < bodySize) {
    const uint64_t left = bodySize - pos;
    const uint8_t *e = body + pos;
    if (left < kEntryMinSize)
      return fail(ErrorCode::BadFormat, "invalid fatbin: truncated entry at offset " +
                                            llvm::Twine(headerSize + pos));
    const uint16_t kind = u16(e);
    const uint32_t entrySize = u32(e + 4);
    const uint64_t payloadSize = u64(e + 8);
    const uint32_t compressedSize = u32(e + 16);
    const uint32_t arch = u32(e + 28);
    const uint64_t flags = u64(e + 40);
    const uint64_t decompressedSize = u64(e + 56);
    if (entrySize < kEntryMinSize || entrySize > left || payloadSize > left - entrySize)
      return fail(ErrorCode::BadFormat, "invalid fatbin: entry at offset " +
                                            llvm::Twine(headerSize + pos) + " runs past the end");
    FatbinMember m;
    m.flags = flags;
    m.offset = headerSize + pos;
    m.format = kind == kKindPtx     ? ImageFormat::Ptx
               : kind == kKindElf   ? ImageFormat::Cubin
               : kind == kKindLtoIr ? ImageFormat::LtoIr
                                    : ImageFormat::Unknown;
    m.arch = storage.save((kind == kKindPtx ? "compute_" : kind == kKindLtoIr ? "lto_" : "sm_") + std::to_string(arch));
    m.payload = Bytes(e + entrySize, payloadSize);
    m.size = payloadSize;
    if ((flags & kFlagZstd) && m.readable()) {
      // Only the frame's header is read: the member used is inflated later (fatbinMemberImage),
      // the others never. It must record the size (nvcc's do), and the entry's must agree.
      const uint64_t recorded = compressedSize > payloadSize ? ZSTD_CONTENTSIZE_ERROR
                                                             : ZSTD_getFrameContentSize(m.payload.data(), compressedSize);
      if (recorded >= ZSTD_CONTENTSIZE_ERROR || recorded != decompressedSize)
        return fail(ErrorCode::BadFormat, "invalid fatbin: entry at offset " + llvm::Twine(m.offset) +
                                              " has bad sizes");
      m.payload = m.payload.first(compressedSize);
      m.size = decompressedSize;
    }
    members.push_back(m);
    pos += entrySize + payloadSize;
  }
  return members;
}

llvm::Expected<Bytes> fatbinMemberImage(const FatbinMember &member, Storage &storage) {
  if (!(member.flags & kFlagZstd)) return member.payload;
  if (member.size > kMaxFatbinInflation)
    return fail(ErrorCode::Unsupported, "fatbin entry at offset " + llvm::Twine(member.offset) + " inflates to " +
                                            llvm::Twine(member.size) + " bytes, past the bound of " +
                                            llvm::Twine(kMaxFatbinInflation) +
                                            " bytes on what one fat binary inflates");
  // Inflated straight into storage: the result is the image devdl reads and links.
  auto out = llvm::WritableMemoryBuffer::getNewUninitMemBuffer(member.size);
  if (!out)
    return fail(ErrorCode::Io, "no memory to inflate the fatbin entry at offset " + llvm::Twine(member.offset));
  const size_t got = ZSTD_decompress(out->getBufferStart(), member.size, member.payload.data(), member.payload.size());
  if (ZSTD_isError(got) || got != member.size)
    return fail(ErrorCode::BadFormat, "invalid fatbin: entry at offset " + llvm::Twine(member.offset) +
                                          ": bad zstd data (" + (ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short") +
                                          ")");
  return storage.adopt(std::move(out));
}

llvm::Expected<std::vector<Bytes>> splitFatbins(Bytes section) {
  std::vector<Bytes> fatbins;
  uint64_t pos = 0;
  while (pos < section.size()) {
    if (section[pos] == 0) {  // padding
      ++pos;
      continue;
    }
    const uint64_t left = section.size() - pos;
    const uint8_t *header = section.data() + pos;
    if (left < kHeaderSize || u32(header) != kFatbinMagic)
      return fail(ErrorCode::BadFormat, "invalid fatbin section: no fat binary at offset " + llvm::Twine(pos));
    const uint16_t headerSize = u16(header + 6);
    const uint64_t bodySize = u64(header + 8);
    if (headerSize < kHeaderSize || headerSize > left || bodySize > left - headerSize)
      return fail(ErrorCode::BadFormat, "invalid fatbin section: the fat binary at offset " + llvm::Twine(pos) +
                                            " runs past the end");
    fatbins.push_back(section.subspan(pos, headerSize + bodySize));
    pos += headerSize + bodySize;
  }
  return fatbins;
}

llvm::Error readFatbin(DeviceImage &image) {
  auto members = listFatbinMembers(image.bytes, *image.storage);
  if (!members) return members.takeError();
  // Every member is the same code for another target: take the symbols of the first readable
  // cubin, else of the first readable PTX (LTO-IR comes with PTX).
  std::string archs;
  const FatbinMember *source = nullptr;
  for (const FatbinMember &m : *members) {
    archs += (archs.empty() ? "" : ",") + std::string(m.arch);
    if (!m.readable() || m.format == ImageFormat::Unknown) continue;
    if (!source || (source->format == ImageFormat::Ptx && m.format == ImageFormat::Cubin)) source = &m;
  }
  image.triple = "nvptx64-nvidia-cuda";
  image.arch = image.storage->save(archs);
  if (members->empty()) return fail(ErrorCode::BadFormat, "invalid fatbin: no entries");
  if (!source) {
    const bool ltoIr = llvm::any_of(*members, [](const FatbinMember &m) { return m.format == ImageFormat::LtoIr; });
    return fail(ErrorCode::Unsupported,
                ltoIr ? "fatbin holds LTO-IR alone (" + archs +
                            "), whose symbols are in NVIDIA's encoding, which devdl does not read: build it "
                            "with -arch=sm_NN -dlto, which puts PTX beside it"
                      : std::string("fatbin holds no cubin or PTX devdl can read (only entries in NVIDIA's own "
                                    "compression)"));
  }
  auto bytes = fatbinMemberImage(*source, *image.storage);
  if (!bytes) return bytes.takeError();
  DeviceImage member;
  member.format = source->format;
  member.bytes = *bytes;
  member.storage = image.storage;
  if (llvm::Error err = derive(member))
    return inImage(std::move(err), "fatbin entry (" + std::string(source->arch) + ")");
  image.symbols = std::move(member.symbols);
  image.statics = std::move(member.statics);
  return llvm::Error::success();
}

}  // namespace devdl::readers
