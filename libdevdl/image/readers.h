// Format readers: each derives an image's target, symbols and property sets from its bytes.
// Internal to libdevdl/image; callers use read_image.h.
#pragma once

#include "image/device_image.h"

#include <llvm/Support/Error.h>

#include <span>
#include <utility>
#include <vector>
#include <string>
#include <string_view>

namespace devdl::readers {

/// Fills target, symbols and property sets of `image` from `image.bytes`, by `image.format`.
/// Fails with BadFormat on truncated or invalid input, never reading out of bounds.
llvm::Error derive(DeviceImage &image);

llvm::Error readSpirv(DeviceImage &image);
llvm::Error readDeviceElf(DeviceImage &image);
llvm::Error readPtx(DeviceImage &image);
llvm::Error readFatbin(DeviceImage &image);
llvm::Error readBitcode(DeviceImage &image);
llvm::Error readIntelNative(DeviceImage &image);

/// The images DPC++'s offload wrapper put in host ELF file `elf`, with their property sets
/// (image/sycl_offload_reader.cpp): inflated into `storage` where compressed. Empty where the
/// file has no DPC++ descriptor (a symbol .sycl_offloading.descriptor); fails naming what does
/// not fit the file, or a version or format devdl does not read. Reads the symbol table: asked
/// only of a file with a section of DPC++'s images (bundle::findDpcppImageSectionsInElf).
/// An image of several that could not be read (`err`): where a listing reads past it (`past`,
/// read_image.h's UnreadableImages), kept as the reason in its place among `images` (an image of
/// no format); else `err` itself.
llvm::Error readPast(llvm::Error err, std::vector<DeviceImage> &images, std::shared_ptr<Storage> storage,
                     std::vector<std::pair<size_t, std::string>> *past);
/// An image that cannot be read is kept as the reason where `past` (readPast).
llvm::Expected<std::vector<DeviceImage>> readSyclOffloadImages(Bytes elf, std::shared_ptr<Storage> storage,
                                                               std::vector<std::pair<size_t, std::string>> *past = nullptr);

/// An ELF file of ocloc's: its legacy container or zebin.
bool isIntelNative(Bytes bytes);

/// Copies of an image's bytes with its definitions of `names` local to it (image/local_definitions.h).
llvm::Expected<std::string> spirvWithLocalDefinitions(Bytes bytes, std::span<const std::string_view> names);
llvm::Expected<std::string> elfWithLocalDefinitions(Bytes bytes, std::span<const std::string_view> names);
llvm::Expected<std::string> ptxWithLocalDefinitions(Bytes bytes, std::span<const std::string_view> names);
/// Copies of an image's bytes with `names` reached through cells (image/instance_cells.h).
llvm::Expected<std::string> spirvWithInstancesElsewhere(Bytes bytes, std::span<const std::string_view> names,
                                                        std::span<const std::string> cells);
llvm::Expected<std::string> ptxWithInstancesElsewhere(Bytes bytes, std::span<const std::string_view> names,
                                                      std::span<const std::string> cells);

/// A SPIR-V module's words, copied out of its bytes; fails where they are no whole module (5
/// header words and 4-byte words).
llvm::Expected<std::vector<uint32_t>> spirvWords(Bytes bytes);
/// The same in this host's byte order; fails where they begin with no SPIR-V magic number.
llvm::Expected<std::vector<uint32_t>> spirvWordsInHostOrder(Bytes bytes);
/// A SPIR-V module's statics by id, named as DeviceImage::statics names them: by OpName, or
/// `OpName.id` where it has none or another has it too.
llvm::Expected<std::vector<std::pair<uint32_t, std::string>>> spirvStatics(Bytes bytes);
/// Copies of an image's bytes with its statics `names` (DeviceImage::statics) exported under
/// `exported` (image/instance_cells.h).
llvm::Expected<std::string> spirvWithStaticsExported(Bytes bytes, std::span<const std::string_view> names,
                                                     std::span<const std::string> exported);
llvm::Expected<std::string> ptxWithStaticsExported(Bytes bytes, std::span<const std::string_view> names,
                                                   std::span<const std::string> exported);

/// One entry of a CUDA fat binary, as stored.
struct FatbinMember {
  ImageFormat format = ImageFormat::Unknown;  // Cubin, Ptx, LtoIr, or Unknown for other kinds
  std::string_view arch;                      // sm_90 for cubins, compute_90 for PTX, lto_90 for LTO-IR
  uint64_t flags = 0;
  uint64_t offset = 0;  // of its entry in the fat binary, for messages
  Bytes payload;        // as stored: compressed where `flags` say so
  uint64_t size = 0;    // of the image: the payload's, or what its zstd frame inflates to

  /// The image is plain or zstd-compressed cubin or PTX: not in NVIDIA's own compression, which
  /// devdl cannot read, and not LTO-IR, which only nvJitLink reads.
  bool readable() const;
};

/// What one fat binary may inflate: its users inflate only the member they read, one each
/// (readFatbin for the symbols, the CUDA backend for its device), so this bounds the whole image.
/// Over six times the largest member in CUDA 13's own libraries (40 MB, in cuDNN's).
inline constexpr uint64_t kMaxFatbinInflation = uint64_t(256) << 20;

/// The fat binaries of a section nvcc made (.nv_fatbin, __nv_relfatbin): one after another,
/// each with its own header, maybe with zero padding between.
llvm::Expected<std::vector<Bytes>> splitFatbins(Bytes section);

/// Lists the members of a fat binary as stored, inflating none. Fails with BadFormat where an
/// entry does not fit or a zstd frame's size disagrees with its entry's.
llvm::Expected<std::vector<FatbinMember>> listFatbinMembers(Bytes fatbin, Storage &storage);

/// The image of a readable member: its payload, or the payload inflated into `storage` where it
/// is zstd-compressed. Fails with Unsupported past kMaxFatbinInflation (naming the bound and the
/// entry's offset), with BadFormat on corrupt zstd data.
llvm::Expected<Bytes> fatbinMemberImage(const FatbinMember &member, Storage &storage);

}  // namespace devdl::readers
