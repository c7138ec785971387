// Host ELF files that carry bundles.
//
// devdl-pack's relocatable object holds the bundle in an allocated `.llvm.offloading` section
// (type SHT_LLVM_OFFLOADING, so llvm-objdump --offloading lists it) and an allocated note
// `.note.devdl` whose descriptor is the bundle's place relative to the note, resolved when the
// object is linked. The linker turns the note into a PT_NOTE segment, so a process finds every
// loaded object's bundles by walking program headers (host/loaded_bundles.h), with no constructors.
#pragma once

#include "support/bytes.h"

#include <llvm/Support/Error.h>

#include <string>
#include <string_view>
#include <vector>

namespace devdl::bundle {

inline constexpr std::string_view kSectionName = ".llvm.offloading";
inline constexpr std::string_view kNoteSectionName = ".note.devdl";
inline constexpr std::string_view kNoteName = "devdl";
inline constexpr uint32_t kNoteTypeBundle = 1;
inline constexpr uint32_t kNoteDescSize = 16;  // descriptor: i64 offset from itself, u64 size
inline constexpr std::string_view kBundleSymbolPrefix = "__devdl_bundle_";

/// True if `bytes` begins with the ELF magic.
bool isElf(Bytes bytes);

/// The bundles a host ELF file carries: the contents of its SHT_LLVM_OFFLOADING sections (or
/// sections named .llvm.offloading), in section order. Empty if it carries none; BadFormat if
/// the ELF itself is malformed.
llvm::Expected<std::vector<Bytes>> findBundlesInElf(Bytes elf);

/// The CUDA fat binaries nvcc put in a host ELF file: the contents of its .nv_fatbin sections
/// (executables and libraries) and __nv_relfatbin sections (objects built with -rdc), in section
/// order. Each may hold several fat binaries one after another.
llvm::Expected<std::vector<Bytes>> findCudaFatbinSectionsInElf(Bytes elf);
/// Of those, the __nv_relfatbin sections alone: the relocatable device code of nvcc -rdc=true
/// objects, which a library linked with devdl's CUDA registration object carries unlinked.
llvm::Expected<std::vector<Bytes>> findRelocatableFatbinSectionsInElf(Bytes elf);

/// A static library's (`ar`) members, in order: each one's name and bytes, a view into `archive`.
/// Fails where the archive cannot be read.
struct ArchiveMember {
  std::string name;
  Bytes bytes;
};
llvm::Expected<std::vector<ArchiveMember>> archiveMembers(Bytes archive);

/// The prefix of the function each nvcc -rdc=true object's constructor calls with its device code,
/// which nvcc -dlink's object (or devdl-pack --cuda-register's) defines: then the object's module id.
inline constexpr std::string_view kCudaRegisterPrefix = "__cudaRegisterLinkedBinary_";

/// The module ids the nvcc -rdc=true objects of a host object or static library (`file`) register:
/// each __cudaRegisterLinkedBinary_<id> one calls, in order, each once; none for objects without
/// relocatable device code. An id is what nvcc writes, letters, digits and '_': any other is
/// refused naming the object and the symbol (the ids are written into C source). An object for
/// another machine than this one's is refused naming it.
llvm::Expected<std::vector<std::string>> cudaModuleIds(Bytes file);

/// The sections where DPC++'s offload wrapper put a host ELF file's device images
/// (__CLANG_OFFLOAD_BUNDLE__sycl-*), in section order; its tables point into them.
llvm::Expected<std::vector<Bytes>> findDpcppImageSectionsInElf(Bytes elf);

/// The global symbol devdl-pack defines at a bundle by default: the prefix and the bundle's
/// XXH3 hash.
std::string defaultBundleSymbol(Bytes bundle);

/// A relocatable ELF object for `triple` (the host's when empty) carrying `bundle`, with a
/// global symbol `symbol` at the bundle's start.
llvm::Expected<std::string> makeHostObject(Bytes bundle, std::string_view triple,
                                           std::string_view symbol);

/// A copy of the ELF file `elf` with `bundle` added as a .llvm.offloading section (readable
/// from the file; not mapped into memory, since no segment is added).
llvm::Expected<std::string> addBundleToElf(Bytes elf, Bytes bundle);

}  // namespace devdl::bundle
