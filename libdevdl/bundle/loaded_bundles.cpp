// Finding bundles in the memory of this process. Kept apart from the LLVM ELF code: <link.h>
// defines the ELF constants as macros, which collide with llvm::ELF's enumerators.
#include "bundle/host_elf.h"

#include <link.h>

#include <cstddef>
#include <cstring>

namespace devdl::bundle {

namespace {

constexpr uint64_t kNoteHeaderSize = 12;

uint64_t alignUp(uint64_t value, uint64_t align) { return (value + align - 1) / align * align; }

// Bounds of the loaded segments of one object, to check a note's claim before following it.
bool insideLoadedSegment(const dl_phdr_info *info, uintptr_t begin, uint64_t size) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto &ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (begin >= lo && begin - lo <= ph.p_memsz && size <= ph.p_memsz - (begin - lo)) return true;
  }
  return false;
}

int collectNotes(dl_phdr_info *info, size_t, void *data) {
  auto &out = *static_cast<std::vector<LoadedBundle> *>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto &ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const size_t align = ph.p_align == 8 ? 8 : 4;
    const auto *seg = reinterpret_cast<const uint8_t *>(info->dlpi_addr + ph.p_vaddr);
    uint64_t pos = 0;
    while (pos <= ph.p_memsz && ph.p_memsz - pos >= kNoteHeaderSize) {
      uint32_t namesz, descsz, type;
      std::memcpy(&namesz, seg + pos, 4);
      std::memcpy(&descsz, seg + pos + 4, 4);
      std::memcpy(&type, seg + pos + 8, 4);
      const uint64_t nameAt = pos + kNoteHeaderSize;
      const uint64_t descAt = alignUp(nameAt + namesz, align);
      const uint64_t next = alignUp(descAt + descsz, align);
      if (next > ph.p_memsz) break;
      if (type == kNoteTypeBundle && namesz == kNoteName.size() + 1 && descsz == kNoteDescSize &&
          std::memcmp(seg + nameAt, kNoteName.data(), namesz) == 0) {
        int64_t offset;
        uint64_t size;
        std::memcpy(&offset, seg + descAt, 8);
        std::memcpy(&size, seg + descAt + 8, 8);
        const uintptr_t begin = reinterpret_cast<uintptr_t>(seg + descAt) + offset;
        if (insideLoadedSegment(info, begin, size))
          out.push_back({info->dlpi_name ? info->dlpi_name : "",
                         Bytes(reinterpret_cast<const uint8_t *>(begin), size)});
      }
      pos = next;
    }
  }
  return 0;
}

}  // namespace

std::vector<LoadedBundle> findLoadedBundles() {
  std::vector<LoadedBundle> out;
  dl_iterate_phdr(collectNotes, &out);
  return out;
}

uint64_t loadedObjectsGeneration() {
  uint64_t generation = 0;
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t size, void *data) -> int {
        // The counters are the same in every entry: read the first and stop.
        if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
          *static_cast<uint64_t *>(data) = info->dlpi_adds + info->dlpi_subs;
        return 1;
      },
      &generation);
  return generation;
}

}  // namespace devdl::bundle
