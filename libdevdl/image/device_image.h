// The device image model: one image of device code with its format, target, bytes and the
// symbols and property sets derived from it or recorded by its producer.
#pragma once

#include "support/bytes.h"

#include <llvm/Support/Allocator.h>
#include <llvm/Support/MemoryBuffer.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace devdl {

class RegularFile;

enum class ImageFormat : uint8_t {
  Unknown,
  SpirV,        // SPIR-V binary module
  SpirBitcode,  // SPIR: LLVM bitcode for spir/spir64
  Cubin,        // NVIDIA device ELF
  Ptx,          // NVIDIA PTX text
  Fatbin,       // NVIDIA fat binary holding cubins and PTX
  DeviceElf,    // another device ELF object (AMDGPU, ...)
  OpenClBinary, // a native OpenCL binary (a compiled object, CL_PROGRAM_BINARIES): no symbol
                // table devdl can read, so only in a bundle that records its symbols
  LtoIr,        // NVIDIA LTO-IR (nvcc -dlto): read only by nvJitLink, so devdl links it from fat
                // binaries, which carry PTX beside it, and recognizes it alone to say so
  IntelNative,  // an Intel GPU binary from ocloc, which carries the SPIR-V it was built from
};

/// "spirv", "spir-bc", "cubin", "ptx", "fatbin", "elf", "opencl-binary", "ltoir", "intel-native",
/// "unknown".
std::string_view formatName(ImageFormat format);
/// The inverse of formatName; nullopt for an unknown name.
std::optional<ImageFormat> formatFromName(std::string_view name);

/// Images of one family can be linked with each other; images of different families never are.
enum class LinkFamily : uint8_t { None, Spirv, Cuda, Amdgpu };
LinkFamily linkFamily(ImageFormat format);

enum class SymbolKind : uint8_t { Kernel, Function, Variable, Import };

struct Symbol {
  std::string_view name;
  SymbolKind kind;
  /// An import of a name the driver may have built in (isDeviceLibraryName): bound where a
  /// definition is in scope, else left to the driver, never an error of devdl's.
  bool weak = false;
};

/// nm's letter: K kernel, T function, D variable, U import, w weak import.
char symbolLetter(const Symbol &symbol);
std::string_view symbolKindName(SymbolKind kind);

/// Property value types, numbered as the seed's `sycl_property_type`.
enum class PropertyType : uint32_t { UInt32 = 1, ByteArray = 2, String = 3 };
std::string_view propertyTypeName(PropertyType type);

struct Property {
  std::string_view name;
  PropertyType type = PropertyType::UInt32;
  uint32_t u32 = 0;       // UInt32
  std::string_view data;  // ByteArray, String
};

struct PropertySet {
  std::string_view name;
  std::vector<Property> properties;

  const Property *find(std::string_view property) const;
};

// Property set names (the seed's, and devdl's own).
inline constexpr std::string_view kVirtualFunctionsSet = "SYCL/virtual functions";
inline constexpr std::string_view kDeviceRequirementsSet = "SYCL/device requirements";
inline constexpr std::string_view kSpecConstantsSet = "SYCL/specialization constants";
inline constexpr std::string_view kExportedSymbolsSet = "SYCL/exported symbols";
inline constexpr std::string_view kImportedSymbolsSet = "SYCL/imported symbols";
inline constexpr std::string_view kModuleSet = "devdl/module";

/// Owns what images point into: the input buffer (often an mmap) and strings made while
/// reading or editing. Images read from one file share one Storage.
class Storage {
 public:
  explicit Storage(std::unique_ptr<llvm::MemoryBuffer> buffer = nullptr)
      : buffer_(std::move(buffer)) {}

  Bytes bytes() const {
    return buffer_ ? asBytes(std::string_view(buffer_->getBufferStart(), buffer_->getBufferSize()))
                   : Bytes();
  }
  /// Copies `s` into storage that lives as long as this object.
  std::string_view save(std::string_view s);
  /// Keeps `buffer` alive as long as this object (decompressed or realigned copies).
  Bytes adopt(std::unique_ptr<llvm::MemoryBuffer> buffer);

 private:
  std::unique_ptr<llvm::MemoryBuffer> buffer_;
  std::vector<std::unique_ptr<llvm::MemoryBuffer>> adopted_;
  // Small slabs: most images save a few short strings (a CUDA arch), and in a fresh process each
  // heap page touched first is a page fault (4 KB slabs cost one for each file read).
  llvm::BumpPtrAllocatorImpl<llvm::MallocAllocator, 512, 512> strings_;
};

class DeviceImage {
 public:
  ImageFormat format = ImageFormat::Unknown;
  std::string_view triple;  // e.g. spir64-unknown-unknown, nvptx64-nvidia-cuda
  std::string_view arch;    // e.g. sm_90; empty where the format is target-independent
  Bytes bytes;              // the image itself: a view into storage
  std::vector<Symbol> symbols;
  /// The writable variables it keeps to itself (C's `static`: no linkage), each named apart from
  /// the others (readers::spirvStatics). Like an exported variable, each has one instance on a
  /// device, which every program linked with the image reaches (image/instance_cells.h).
  std::vector<std::string_view> statics;
  std::vector<PropertySet> propertySets;
  std::shared_ptr<Storage> storage;
  /// Its bytes passed its format's reader (readRawImage); an image a bundle recorded the symbols
  /// of has not, until checkImage (image/read_image.h) reads them.
  bool checked = false;
  /// Why the SPIR-V validator could not vouch for a module devdl read all the same (one that
  /// declares extensions newer than the validator); empty where it did. Such an image goes only
  /// to a driver that judges SPIR-V itself, never to devdl's own SPIR-V processing.
  std::string_view unvalidated;

  /// An image taken from its file's summary (store/image_summary.h) rather than read has no
  /// bytes: readUnread (image/read_image.h) reads them from the file when it is linked.
  struct Unread {
    std::shared_ptr<const RegularFile> file;  // kept open: the file opened, whatever is renamed over its name
    uint32_t index = 0;                       // among the file's images
    uint64_t hashLow = 0, hashHigh = 0;       // XXH3-128 of its bytes, which they must have still
    std::array<uint8_t, 8> head{};            // its first bytes (head())
    uint8_t headSize = 0;
  };
  std::optional<Unread> unread;

  /// Its first bytes, at most 8, unread or not: what a backend may judge it by without the rest
  /// (a SPIR-V module's version).
  Bytes head() const {
    return unread ? Bytes(unread->head.data(), unread->headSize) : bytes.first(std::min<size_t>(bytes.size(), 8));
  }

  /// A label for messages and listings: "image 2 (spirv)".
  std::string label(size_t index) const;

  const PropertySet *findSet(std::string_view name) const;
  PropertySet &getOrAddSet(std::string_view name);
  /// Adds or replaces a property; strings are copied into storage.
  void setProperty(std::string_view set, std::string_view name, uint32_t value);
  void setProperty(std::string_view set, std::string_view name, PropertyType type,
                   std::string_view data);

  /// Copies every string the image points to (symbol names, target, properties) into its
  /// storage: afterwards only `bytes` refers to memory the image does not own (a host object's,
  /// which the host may unload).
  void ownStrings();

  /// The module id (devdl/module id), empty if none was recorded.
  std::string_view moduleId() const;
  /// The module ids it needs (devdl/module depends, comma-separated), in order.
  std::vector<std::string_view> dependencies() const;
  /// The files it needs, by name, in order (devdl/module needed, comma-separated), as an ELF
  /// object's DT_NEEDED entries.
  std::vector<std::string_view> neededFiles() const;
  /// Where its needed files are looked for first (devdl/module runpath: directories separated by
  /// colons, $ORIGIN standing for the directory of its file), as DT_RUNPATH; empty if none.
  std::string_view runPath() const;
};

/// The seed's import filter: reserved names (`__` prefix, also after demangling), SPIR-V and
/// OpenCL builtins, LLVM intrinsics and section-like names are not imports.
bool isImportableName(std::string_view name);

/// A name of SYCL's device libraries (`__devicelib_` prefix): the functions DPC++'s wrappers call,
/// which a driver may have built in (cl_intel_devicelib_*) and SYCL's fallback libraries define.
/// Reserved, so not an import by the seed's filter; imported weakly (Symbol::weak).
bool isDeviceLibraryName(std::string_view name);

/// What a SPIR-V or SPIR image's undefined `name` is: an import (isImportableName), a weak one
/// (isDeviceLibraryName), or none (a builtin or other reserved name).
std::optional<Symbol> spirImport(std::string_view name);

/// Who provides a CUDA image's undefined name where no image defines it: the driver's linker
/// (device printf's vprintf, malloc and free), the CUDA device runtime, libcudadevrt (dynamic
/// parallelism's __cudaCDP2*, the device-side cuda* API such as cudaGraphSetConditional), or
/// nobody but another image.
enum class CudaProvider : uint8_t { Image, Driver, DeviceRuntime };
CudaProvider cudaProviderOf(std::string_view name);

/// What a cubin's or PTX's undefined `name` is: an import (isImportableName); a weak one where
/// the CUDA toolchain provides it (cudaProviderOf): bound where an image defines it, else left to
/// the link, which adds the device runtime where an image needs it; or none.
std::optional<Symbol> cudaImport(std::string_view name);

/// The seed's symbol property sets (exported, imported) built from an image's symbols, for
/// listings and SYCL-compatible consumers.
std::vector<PropertySet> symbolPropertySets(const DeviceImage &image);

}  // namespace devdl
