// Finding bundles in the memory of this process. Kept apart from the LLVM ELF code: <link.h>
// defines the ELF constants as macros, which collide with llvm::ELF's enumerators.
#include "host/loaded_bundles.h"
#include "bundle/host_elf.h"
#include "host/preloads.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstddef>
#include <cstring>
#include <optional>
#include <string_view>

namespace devdl::host {

namespace {

constexpr uint64_t kNoteHeaderSize = 12;
// Exports asked of the global scope before an object is taken as global: the first is nearly
// always its own or found nowhere; the others are for names another object interposes.
constexpr size_t kMaxProbes = 8;

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

// The number of entries of a GNU hash table's symbol table: one past the last symbol its
// chains reach.
size_t gnuHashSymbols(const dl_phdr_info *info, uintptr_t table) {
  const auto *words = reinterpret_cast<const uint32_t *>(table);
  if (!insideLoadedSegment(info, table, 16)) return 0;
  const uint32_t buckets = words[0], first = words[1], bloomWords = words[2];
  const uintptr_t bucketsAt = table + 16 + uintptr_t(bloomWords) * sizeof(ElfW(Addr));
  if (!insideLoadedSegment(info, bucketsAt, uint64_t(buckets) * 4)) return 0;
  const auto *bucket = reinterpret_cast<const uint32_t *>(bucketsAt);
  uint32_t last = 0;
  for (uint32_t i = 0; i < buckets; ++i) last = std::max(last, bucket[i]);
  if (last < first) return first;
  const uintptr_t chainsAt = bucketsAt + uintptr_t(buckets) * 4;
  for (;; ++last) {
    const uintptr_t at = chainsAt + uintptr_t(last - first) * 4;
    if (!insideLoadedSegment(info, at, 4)) return 0;
    if (*reinterpret_cast<const uint32_t *>(at) & 1) return last + 1;
  }
}

// The object's dynamic section in memory; null where it has none.
const ElfW(Dyn) *dynamicOf(const dl_phdr_info *info) {
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      return reinterpret_cast<const ElfW(Dyn) *>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  return nullptr;
}

// An address the dynamic section holds, in memory: glibc rewrites them to absolute ones where the
// segment is writable and leaves them relative to the load address elsewhere; both are taken. 0
// where it is in no loaded segment.
uintptr_t loadedAddress(const dl_phdr_info *info, uintptr_t value) {
  if (!value) return 0;
  if (insideLoadedSegment(info, value, 1)) return value;
  if (insideLoadedSegment(info, info->dlpi_addr + value, 1)) return info->dlpi_addr + value;
  return 0;
}

// An object's dynamic symbol table, in memory.
struct DynamicSymbols {
  const ElfW(Sym) *symbols = nullptr;
  size_t count = 0;
  // Those before the first a GNU hash table chains (all of them without one): every undefined
  // symbol is among them, as only defined ones are hashed.
  size_t unhashed = 0;
  const char *strings = nullptr;
  uint64_t stringsSize = 0;
  const uint16_t *versions = nullptr;  // DT_VERSYM, where it has one
  std::string_view name(const ElfW(Sym) &sym) const {
    if (sym.st_name >= stringsSize) return {};
    return {strings + sym.st_name, strnlen(strings + sym.st_name, stringsSize - sym.st_name)};
  }
};

DynamicSymbols dynamicSymbolsOf(const dl_phdr_info *info) {
  DynamicSymbols table;
  const ElfW(Dyn) *dynamic = dynamicOf(info);
  if (!dynamic) return table;
  uintptr_t symtab = 0, strtab = 0, hash = 0, gnuHash = 0, versym = 0;
  uint64_t strsz = 0;
  for (const ElfW(Dyn) *d = dynamic; d->d_tag != DT_NULL; ++d) switch (d->d_tag) {
      case DT_SYMTAB: symtab = d->d_un.d_ptr; break;
      case DT_STRTAB: strtab = d->d_un.d_ptr; break;
      case DT_STRSZ: strsz = d->d_un.d_val; break;
      case DT_HASH: hash = d->d_un.d_ptr; break;
      case DT_GNU_HASH: gnuHash = d->d_un.d_ptr; break;
      case DT_VERSYM: versym = d->d_un.d_ptr; break;
    }
  auto address = [&](uintptr_t value) { return loadedAddress(info, value); };
  symtab = address(symtab), strtab = address(strtab), hash = address(hash), gnuHash = address(gnuHash);
  versym = address(versym);
  if (!symtab || !strtab || !insideLoadedSegment(info, strtab, strsz)) return table;
  size_t count = 0;
  if (hash && insideLoadedSegment(info, hash, 8)) count = reinterpret_cast<const uint32_t *>(hash)[1];
  else if (gnuHash) count = gnuHashSymbols(info, gnuHash);
  if (!insideLoadedSegment(info, symtab, uint64_t(count) * sizeof(ElfW(Sym)))) return table;
  if (versym && !insideLoadedSegment(info, versym, uint64_t(count) * 2)) versym = 0;
  table.symbols = reinterpret_cast<const ElfW(Sym) *>(symtab);
  table.count = count;
  table.unhashed = count;
  if (!(hash && insideLoadedSegment(info, hash, 8)) && gnuHash && count)  // its header checked
    table.unhashed = std::min<size_t>(count, reinterpret_cast<const uint32_t *>(gnuHash)[1]);
  table.strings = reinterpret_cast<const char *>(strtab);
  table.stringsSize = strsz;
  table.versions = reinterpret_cast<const uint16_t *>(versym);
  return table;
}

// Which carrier of images in its file the object has, by the function its constructors hand
// them to, which it imports: DPC++'s offload wrapper calls the SYCL runtime's
// __sycl_register_lib, devdl's CUDA registration object device_dlregister_cuda. Only the unhashed
// symbols are looked at: a scan of a process with large libraries stays short.
std::optional<LoadedBundle::Carrier> carrierInFile(const dl_phdr_info *info) {
  const DynamicSymbols table = dynamicSymbolsOf(info);
  for (size_t i = 1; i < table.unhashed; ++i) {
    if (table.symbols[i].st_shndx != SHN_UNDEF) continue;
    const std::string_view name = table.name(table.symbols[i]);
    if (name == "__sycl_register_lib") return LoadedBundle::Carrier::OffloadTables;
    if (name == "device_dlregister_cuda") return LoadedBundle::Carrier::CudaObjects;
  }
  return std::nullopt;
}

// The names an object exports, from its dynamic symbol table in memory; the one at `bundle`
// first.
std::vector<std::string> exportsOf(const dl_phdr_info *info, uintptr_t bundle) {
  std::vector<std::string> names;
  const DynamicSymbols table = dynamicSymbolsOf(info);
  for (size_t i = 1; i < table.count; ++i) {
    const ElfW(Sym) &sym = table.symbols[i];
    // The ELF64 macros are the ELF32 ones: one layout of st_info and st_other.
    const unsigned bind = ELF64_ST_BIND(sym.st_info), type = ELF64_ST_TYPE(sym.st_info);
    const unsigned visibility = ELF64_ST_VISIBILITY(sym.st_other);
    if (sym.st_shndx == SHN_UNDEF || sym.st_shndx == SHN_ABS || sym.st_name >= table.stringsSize) continue;
    if (bind != STB_GLOBAL && bind != STB_WEAK) continue;
    if (type != STT_FUNC && type != STT_OBJECT && type != STT_NOTYPE) continue;
    if (visibility != STV_DEFAULT && visibility != STV_PROTECTED) continue;
    if (table.versions && (table.versions[i] & 0x8000)) continue;  // a hidden version
    const std::string text(table.name(sym));
    if (info->dlpi_addr + sym.st_value == bundle) names.insert(names.begin(), text);
    else if (names.size() < kMaxProbes) names.push_back(text);
  }
  if (names.size() > kMaxProbes) names.resize(kMaxProbes);
  return names;
}

// The host loader's counters of loads and unloads: the same in every entry of one walk.
uint64_t generationOf(const dl_phdr_info *info, size_t size) {
  return size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs ? info->dlpi_adds + info->dlpi_subs : 0;
}

// The object's loaded segments.
std::vector<std::pair<uintptr_t, uintptr_t>> segmentsOf(const dl_phdr_info *info) {
  std::vector<std::pair<uintptr_t, uintptr_t>> segments;
  for (int j = 0; j < info->dlpi_phnum; ++j)
    if (info->dlpi_phdr[j].p_type == PT_LOAD) {
      const uintptr_t lo = info->dlpi_addr + info->dlpi_phdr[j].p_vaddr;
      segments.emplace_back(lo, lo + info->dlpi_phdr[j].p_memsz);
    }
  return segments;
}

// An object's DT_SONAME and DT_NEEDED names, in memory.
struct DynamicNames {
  std::string soname;
  std::vector<std::string> needed;
};

DynamicNames dynamicNamesOf(const dl_phdr_info *info) {
  DynamicNames names;
  const ElfW(Dyn) *dynamic = dynamicOf(info);
  if (!dynamic) return names;
  uintptr_t strtab = 0;
  uint64_t strsz = 0;
  std::optional<uint64_t> soname;
  std::vector<uint64_t> needed;
  for (const ElfW(Dyn) *d = dynamic; d->d_tag != DT_NULL; ++d) switch (d->d_tag) {
      case DT_STRTAB: strtab = d->d_un.d_ptr; break;
      case DT_STRSZ: strsz = d->d_un.d_val; break;
      case DT_SONAME: soname = d->d_un.d_val; break;
      case DT_NEEDED: needed.push_back(d->d_un.d_val); break;
    }
  strtab = loadedAddress(info, strtab);
  if (!strtab || !insideLoadedSegment(info, strtab, strsz)) return names;
  auto text = [&](uint64_t at) -> std::string {
    if (at >= strsz) return {};
    const char *start = reinterpret_cast<const char *>(strtab) + at;
    return std::string(start, strnlen(start, strsz - at));
  };
  if (soname) names.soname = text(*soname);
  for (uint64_t at : needed) names.needed.push_back(text(at));
  return names;
}

// Every loaded object, as a walk lists it, with what dependency closures need.
struct ListedObject {
  std::string name;
  uintptr_t base = 0;
  DynamicNames names;
};

struct Walk {
  LoadedObjects found;
  std::vector<ListedObject> objects;
};

// Whether the host loader takes `object` for the DT_NEEDED name `needed`: its soname, or the
// name it was loaded from.
bool satisfies(const ListedObject &object, std::string_view needed) {
  return !needed.empty() && (object.names.soname == needed || loadedFrom(needed, object.name));
}

// The positions in `objects` of `objects[root]` and what it needs, breadth first.
std::vector<size_t> neededOrder(const std::vector<ListedObject> &objects, size_t root) {
  std::vector<size_t> order{root};
  for (size_t next = 0; next < order.size(); ++next)
    for (const std::string &name : objects[order[next]].names.needed) {
      auto it =
          std::find_if(objects.begin(), objects.end(), [&](const ListedObject &o) { return satisfies(o, name); });
      if (it == objects.end()) continue;
      const size_t found = static_cast<size_t>(it - objects.begin());
      if (std::find(order.begin(), order.end(), found) == order.end()) order.push_back(found);
    }
  return order;
}

// The objects `objects[root]` needs, breadth first, without itself.
std::vector<ObjectLoad> neededClosure(const std::vector<ListedObject> &objects, size_t root) {
  const std::vector<size_t> order = neededOrder(objects, root);
  std::vector<ObjectLoad> needs;
  for (size_t i = 1; i < order.size(); ++i) needs.push_back({objects[order[i]].name, objects[order[i]].base});
  return needs;
}

// Which of `objects` the host loader loaded with the program (LoadedBundle::withProgram): the
// executable (the first), the LD_PRELOAD objects, and what they need.
std::vector<bool> loadedWithProgram(const std::vector<ListedObject> &objects) {
  std::vector<bool> with(objects.size(), false);
  std::vector<size_t> roots;
  if (!objects.empty()) roots.push_back(0);
  for (const std::string &preload : preloadList(std::getenv("LD_PRELOAD")))
    for (size_t i = 0; i < objects.size(); ++i)
      if (loadedFrom(preload, objects[i].name)) roots.push_back(i);
  for (size_t root : roots)
    for (size_t at : neededOrder(objects, root)) with[at] = true;
  return with;
}

int collectNotes(dl_phdr_info *info, size_t size, void *data) {
  auto &walk = *static_cast<Walk *>(data);
  walk.objects.push_back({info->dlpi_name ? info->dlpi_name : "", info->dlpi_addr, dynamicNamesOf(info)});
  auto &found = walk.found;
  found.generation = generationOf(info, size);
  std::vector<LoadedBundle> &out = found.bundles;
  // An object whose images are in its file, read from there, after its bundles.
  const std::optional<LoadedBundle::Carrier> inFile = carrierInFile(info);
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
      if (type == bundle::kNoteTypeBundle && namesz == bundle::kNoteName.size() + 1 && descsz == bundle::kNoteDescSize &&
          std::memcmp(seg + nameAt, bundle::kNoteName.data(), namesz) == 0) {
        int64_t offset;
        uint64_t size;
        std::memcpy(&offset, seg + descAt, 8);
        std::memcpy(&size, seg + descAt + 8, 8);
        const uintptr_t begin = reinterpret_cast<uintptr_t>(seg + descAt) + offset;
        if (insideLoadedSegment(info, begin, size)) {
          LoadedBundle bundle{info->dlpi_name ? info->dlpi_name : "", info->dlpi_addr,
                              Bytes(reinterpret_cast<const uint8_t *>(begin), size), segmentsOf(info), {}};
          if (!bundle.object.empty()) bundle.exports = exportsOf(info, begin);
          out.push_back(std::move(bundle));
        }
      }
      pos = next;
    }
  }
  if (inFile) {
    LoadedBundle file{info->dlpi_name ? info->dlpi_name : "", info->dlpi_addr,
                      Bytes(reinterpret_cast<const uint8_t *>(dynamicOf(info)), 0), segmentsOf(info), {}};
    file.carrier = *inFile;
    if (!file.object.empty()) file.exports = exportsOf(info, 0);
    out.push_back(std::move(file));
  }
  return 0;
}

// The main program's handle: dlsym through it searches the global scope as RTLD_DEFAULT does,
// without recording a dependency of the caller on what it finds. Made by whichever thread asks
// first, without making another wait (it may hold the host loader's lock).
void *globalScopeHandle() {
  static std::atomic<void *> handle{nullptr};
  void *h = handle.load(std::memory_order_acquire);
  if (!h) {
    h = dlopen(nullptr, RTLD_LAZY);
    handle.store(h, std::memory_order_release);  // the same handle whoever stores it
  }
  return h;
}

}  // namespace

bool loadedFrom(std::string_view name, std::string_view object) {
  if (name.find('/') != std::string_view::npos) return name == object;
  const size_t slash = object.rfind('/');
  return object.substr(slash == std::string_view::npos ? 0 : slash + 1) == name;
}

LoadedObjects findLoadedBundles() {
  Walk walk;
  dl_iterate_phdr(collectNotes, &walk);
  const std::vector<bool> withProgram = loadedWithProgram(walk.objects);
  for (LoadedBundle &bundle : walk.found.bundles) {
    auto object = std::find_if(walk.objects.begin(), walk.objects.end(), [&](const ListedObject &o) {
      return o.name == bundle.object && o.base == bundle.base;
    });
    if (object == walk.objects.end()) continue;
    const size_t at = static_cast<size_t>(object - walk.objects.begin());
    bundle.needs = neededClosure(walk.objects, at);
    bundle.withProgram = withProgram[at];
  }
  return std::move(walk.found);
}

uint64_t loadedObjectsGeneration() {
  uint64_t generation = 0;
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t size, void *data) -> int {
        *static_cast<uint64_t *>(data) = generationOf(info, size);
        return 1;  // the first entry says it
      },
      &generation);
  return generation;
}

std::optional<LoadMark> loadMarkOf(const void *address) {
  dl_find_object found;
  if (_dl_find_object(const_cast<void *>(address), &found) != 0) return std::nullopt;
  return LoadMark{found.dlfo_link_map, found.dlfo_map_start};
}

std::optional<bool> inGlobalScope(const LoadedBundle &bundle) {
  if (bundle.object.empty()) return true;
  for (const std::string &name : bundle.exports) {
    const auto found = reinterpret_cast<uintptr_t>(dlsym(globalScopeHandle(), name.c_str()));
    if (!found) return false;  // the object defines it: were it global, dlsym would find one
    for (const auto &[begin, end] : bundle.segments)
      if (found >= begin && found < end) return true;
  }
  return std::nullopt;
}

namespace {
thread_local unsigned constructorsRunning = 0;
}  // namespace

InConstructor::InConstructor() { ++constructorsRunning; }
InConstructor::~InConstructor() { --constructorsRunning; }
bool InConstructor::now() { return constructorsRunning > 0; }

std::shared_ptr<ObjectReference> ObjectReference::take(const std::string &path, uintptr_t base) {
  if (path.empty()) return nullptr;
  if (InConstructor::now()) return std::shared_ptr<ObjectReference>(new ObjectReference(nullptr));
  void *handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (!handle) return nullptr;
  const link_map *map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map || map->l_addr != base) {
    dlclose(handle);
    return nullptr;
  }
  return std::shared_ptr<ObjectReference>(new ObjectReference(handle));
}

ObjectReference::~ObjectReference() {
  if (handle_) dlclose(handle_);
}

std::optional<std::vector<std::shared_ptr<const void>>> referenceAll(std::span<const ObjectLoad> loads) {
  std::vector<std::shared_ptr<const void>> references;
  for (const ObjectLoad &load : loads) {
    auto reference = ObjectReference::take(load.path, load.base);
    if (!reference) return std::nullopt;
    references.push_back(std::move(reference));
  }
  return references;
}

}  // namespace devdl::host
