// Reading device images from anything that holds them: a raw image (SPIR-V, SPIR bitcode,
// cubin, PTX, fatbin), a bundle, or a host ELF file that carries bundles.
#pragma once

#include "image/device_image.h"
#include "support/regular_file.h"

#include <llvm/Support/Error.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace devdl {

/// Images a listing read past (readImageFile with `listing`): each one's index among the file's
/// images and why it could not be read.
using UnreadableImages = std::vector<std::pair<size_t, std::string>>;

/// What a file holds: its images in order. The images keep their storage alive themselves.
struct ImageFile {
  std::string name;
  std::vector<DeviceImage> images;
  /// Read for a listing, the images that could not be read, each kept in its place as an image
  /// of no format (ImageFormat::Unknown); empty otherwise.
  UnreadableImages unreadable;
};

/// The format of a raw device image by its first bytes; Unknown for bundles, host ELF files
/// and anything else.
ImageFormat sniffFormat(Bytes bytes);

/// Reads the images of the regular file at `path` (support/regular_file.h: read, not mapped).
/// Fails naming the file: missing or unreadable (NotFound, Io), not a regular file (Io), empty,
/// truncated or corrupt (BadFormat, also naming the image), an ELF file that is neither a device
/// object nor carries a bundle (BadFormat).
/// With `listing` (devdl-nm, devdl-pack --check), an image of a file of several that cannot be
/// read is kept as the reason (ImageFile::unreadable) and the others are read on, as nm goes on
/// past a bad archive member; the loader reads a file whole or refuses it.
llvm::Expected<ImageFile> readImageFile(const std::string &path, bool listing = false);
/// Same for a file already open.
llvm::Expected<ImageFile> readImageFile(const RegularFile &file, bool listing = false);

/// The images in DPC++'s offload tables of the host ELF file at `path`, alone (not its bundles or
/// fat binaries, which the process finds in memory): for an object the host loaded. None where it
/// has none; fails as readImageFile does.
llvm::Expected<std::vector<DeviceImage>> readDpcppImagesOfFile(const std::string &path);

/// The fat binaries of the __nv_relfatbin sections of the host ELF file at `path`, each an image:
/// the relocatable device code of the nvcc -rdc=true objects of a library linked with devdl's
/// CUDA registration object (include/devdl_cuda.h), for an object the host loaded. None where it
/// has none; fails as readImageFile does.
llvm::Expected<std::vector<DeviceImage>> readCudaObjectImagesOfFile(const std::string &path);

/// Same for bytes in memory. `storage` owns them, or they outlive every image returned; in
/// both cases what reading makes (decompressed members, unescaped strings) goes into `storage`,
/// or into a new one where it is null. The same holds for the functions below.
llvm::Expected<ImageFile> readImageMemory(Bytes bytes, std::string name,
                                          std::shared_ptr<Storage> storage, bool listing = false);

/// One raw image of a known format, with symbols and properties derived from its bytes.
llvm::Expected<DeviceImage> readRawImage(Bytes bytes, ImageFormat format,
                                         std::shared_ptr<Storage> storage);

/// The image `image.unread` says where to find, read: its file read again, as it was opened, and
/// its image there, which must have the bytes summarized (their hash). Fails where the file
/// changed since (Io, for the caller to name the image) or cannot be read (naming the file).
llvm::Expected<DeviceImage> readUnread(const DeviceImage &image);
/// The same for the images of one link: `files` keeps the files read, each read once however many
/// of its images the link takes.
using UnreadFiles = std::map<const RegularFile *, ImageFile>;
llvm::Expected<DeviceImage> readUnread(const DeviceImage &image, UnreadFiles &files);

/// Reads the bytes of an image as a loose file's are read (the SPIR-V validator, the ELF, PTX,
/// fatbin and bitcode readers), unless they were: an image is linked only once this passed, so
/// a bundle's recorded symbols never let unchecked bytes reach a linker or translator. Gives the
/// image so read, in a storage of its own: its bytes as the reader leaves them (SPIR-V in this
/// host's byte order, its blocks laid out as SPIR-V asks), and why the SPIR-V validator could not
/// vouch for a module read all the same (DeviceImage::unvalidated); nullopt for one read or
/// checked already, and for native OpenCL binaries, left to their driver, the only reader of them.
llvm::Expected<std::optional<DeviceImage>> checkImage(const DeviceImage &image);

/// The images of one bundle. Envelopes with devdl's keys keep their recorded symbols and
/// properties; others (e.g. from clang-offload-packager) are derived from their bytes.
llvm::Expected<std::vector<DeviceImage>> readBundleImages(Bytes bundle,
                                                          std::shared_ptr<Storage> storage,
                                                          UnreadableImages *past = nullptr);

/// Packs images into bundle bytes: deterministic, one envelope per image.
std::string packImages(const std::vector<DeviceImage> &images);

}  // namespace devdl
