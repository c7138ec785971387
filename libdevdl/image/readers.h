// Format readers: each derives an image's target, symbols and property sets from its bytes.
// Internal to libdevdl/image; callers use read_image.h.
#pragma once

#include "image/device_image.h"

#include <llvm/Support/Error.h>

#include <span>
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

/// Copies of an image's bytes with its definitions of `names` local to it (image/local_definitions.h).
llvm::Expected<std::string> spirvWithLocalDefinitions(Bytes bytes, std::span<const std::string_view> names);
llvm::Expected<std::string> elfWithLocalDefinitions(Bytes bytes, std::span<const std::string_view> names);
llvm::Expected<std::string> ptxWithLocalDefinitions(Bytes bytes, std::span<const std::string_view> names);

/// One entry of a CUDA fat binary.
struct FatbinMember {
  ImageFormat format = ImageFormat::Unknown;  // Cubin, Ptx, or Unknown for other kinds
  std::string_view arch;                      // sm_90 for cubins, compute_90 for PTX
  uint64_t flags = 0;
  bool compressed = false;
  Bytes payload;  // decompressed where devdl can (zstd); empty where it cannot
};

/// The fat binaries of a section nvcc made (.nv_fatbin, __nv_relfatbin): one after another,
/// each with its own header, maybe with zero padding between.
llvm::Expected<std::vector<Bytes>> splitFatbins(Bytes section);

/// Lists the members of a fat binary; zstd-compressed payloads are decompressed into storage.
llvm::Expected<std::vector<FatbinMember>> listFatbinMembers(Bytes fatbin, Storage &storage);

}  // namespace devdl::readers
