// Device ELF objects (cubins, AMDGPU code objects) through LLVM Object: defined global functions
// and objects are exports, undefined globals imports, CUDA entry functions kernels.
#include "image/readers.h"
#include "support/error.h"

#include <llvm/BinaryFormat/ELF.h>
#include <llvm/ADT/STLExtras.h>
#include <llvm/Object/ELFObjectFile.h>

#include <cstddef>

namespace devdl::readers {

namespace {

constexpr uint8_t kStoCudaEntry = 0x10;         // st_other bit nvcc sets on __global__ functions
constexpr uint8_t kStoCudaShared = 0x40;        // and on symbols in shared memory (0x20 global, 0x80 constant)
constexpr uint8_t kSttCudaObject = 13;          // STT_LOPROC: nvcc's type for __device__ variables
constexpr unsigned kCudaAbiVersionNewFlags = 8;  // from this ABI version on, SM is in e_flags[15:8]

std::string cudaArch(const llvm::object::ELF64LEFile &elf) {
  const auto &header = elf.getHeader();
  unsigned sm = header.e_ident[llvm::ELF::EI_ABIVERSION] >= kCudaAbiVersionNewFlags
                    ? (header.e_flags >> 8) & 0xff
                    : header.e_flags & 0xff;
  return "sm_" + std::to_string(sm);
}

llvm::Error invalidElf(llvm::Error err) {
  return fail(ErrorCode::BadFormat, "invalid device ELF: " + llvm::toString(std::move(err)));
}

using ElfSections = llvm::object::ELF64LEFile::Elf_Shdr_Range;
using ElfSymbol = llvm::object::ELF64LE::Sym;

// The image's format, triple and arch, from the ELF header's machine.
llvm::Error readTarget(DeviceImage &image, const llvm::object::ELF64LEFile &elf) {
  const uint16_t machine = elf.getHeader().e_machine;
  if (machine == llvm::ELF::EM_CUDA) {
    image.format = ImageFormat::Cubin;
    image.triple = "nvptx64-nvidia-cuda";
    image.arch = image.storage->save(cudaArch(elf));
  } else if (machine == llvm::ELF::EM_AMDGPU) {
    image.format = ImageFormat::DeviceElf;
    image.triple = "amdgcn-amd-amdhsa";
  } else {
    return fail(ErrorCode::BadFormat,
                "not a device ELF object (machine " + llvm::Twine(machine) + ")");
  }
  return llvm::Error::success();
}

// A CUDA object's local variable in global memory is a static (DeviceImage::statics); not
// the compiler's own (`$str`, a string literal).
bool isCudaLocalVariable(const ElfSymbol &s, uint16_t machine, size_t sectionCount) {
  const uint8_t type = s.getType();
  return s.getBinding() == llvm::ELF::STB_LOCAL && machine == llvm::ELF::EM_CUDA &&
         (type == llvm::ELF::STT_OBJECT || type == kSttCudaObject) && s.st_shndx != llvm::ELF::SHN_UNDEF &&
         s.st_shndx < sectionCount;
}

// A static of `s`, one isCudaLocalVariable picks (its section index checked), unless the compiler's own.
llvm::Error readCudaStatic(DeviceImage &image, const llvm::object::ELF64LEFile &elf, ElfSections sections,
                           llvm::StringRef strings, const ElfSymbol &s) {
  auto section = elf.getSectionName(sections[s.st_shndx]);
  if (!section) return invalidElf(section.takeError());
  auto nameOrErr = s.getName(strings);
  if (!nameOrErr) return invalidElf(nameOrErr.takeError());
  if (section->startswith(".nv.global") && !nameOrErr->startswith("$"))
    image.statics.emplace_back(nameOrErr->data(), nameOrErr->size());
  return llvm::Error::success();
}

// One symbol of the table: a static, an import or an export, or none of them.
llvm::Error readSymbol(DeviceImage &image, const llvm::object::ELF64LEFile &elf, ElfSections sections,
                       llvm::StringRef strings, const ElfSymbol &s) {
  const uint16_t machine = elf.getHeader().e_machine;
  const uint8_t type = s.getType();
  if (isCudaLocalVariable(s, machine, sections.size())) return readCudaStatic(image, elf, sections, strings, s);
  // Section and file symbols are never exports or imports (nor is the null symbol).
  if (s.getBinding() == llvm::ELF::STB_LOCAL || type == llvm::ELF::STT_SECTION || type == llvm::ELF::STT_FILE)
    return llvm::Error::success();
  // Shared memory is each block's own, placed by the link in the one module it makes: an extern
  // __shared__ array (the kernel's dynamic shared memory) or a __shared__ variable is neither
  // an import nor a variable with an instance.
  if (machine == llvm::ELF::EM_CUDA && type != llvm::ELF::STT_FUNC && (s.st_other & kStoCudaShared))
    return llvm::Error::success();
  auto nameOrErr = s.getName(strings);
  if (!nameOrErr) return invalidElf(nameOrErr.takeError());
  std::string_view name(nameOrErr->data(), nameOrErr->size());
  if (s.st_shndx == llvm::ELF::SHN_UNDEF) {
    auto import = machine == llvm::ELF::EM_CUDA ? cudaImport(name)
                  : isImportableName(name)       ? std::optional<Symbol>(Symbol{name, SymbolKind::Import})
                                                 : std::nullopt;
    if (import) image.symbols.push_back(*import);
    return llvm::Error::success();
  }
  if (type == llvm::ELF::STT_FUNC)
    image.symbols.push_back(
        {name, machine == llvm::ELF::EM_CUDA && (s.st_other & kStoCudaEntry) ? SymbolKind::Kernel
                                                                            : SymbolKind::Function});
  else if (type == llvm::ELF::STT_OBJECT || (machine == llvm::ELF::EM_CUDA && type == kSttCudaObject))
    image.symbols.push_back({name, SymbolKind::Variable});
  return llvm::Error::success();
}

}  // namespace

llvm::Error readDeviceElf(DeviceImage &image) {
  auto file = llvm::object::ELF64LEFile::create(llvm::StringRef(asText(image.bytes)));
  if (!file) return invalidElf(file.takeError());
  const auto &elf = *file;
  if (llvm::Error err = readTarget(image, elf)) return err;
  auto sections = elf.sections();
  if (!sections) return invalidElf(sections.takeError());
  // The symbol table and its string table are found once, not once per symbol.
  for (const auto &section : *sections) {
    if (section.sh_type != llvm::ELF::SHT_SYMTAB) continue;
    auto symbols = elf.symbols(&section);
    if (!symbols) return invalidElf(symbols.takeError());
    auto strings = elf.getStringTableForSymtab(section, *sections);
    if (!strings) return invalidElf(strings.takeError());
    for (const auto &s : *symbols)
      if (llvm::Error err = readSymbol(image, elf, *sections, *strings, s)) return err;
    break;  // one symbol table, as ELFObjectFile reads it
  }
  return llvm::Error::success();
}

llvm::Expected<std::string> elfWithLocalDefinitions(Bytes bytes, std::span<const std::string_view> names) {
  auto file = llvm::object::ELF64LEFile::create(llvm::StringRef(asText(bytes)));
  if (!file) return invalidElf(file.takeError());
  auto sections = file->sections();
  if (!sections) return invalidElf(sections.takeError());
  std::string out(asText(bytes));
  for (const auto &section : *sections) {
    if (section.sh_type != llvm::ELF::SHT_SYMTAB) continue;
    auto symbols = file->symbols(&section);
    if (!symbols) return invalidElf(symbols.takeError());
    auto strings = file->getStringTableForSymtab(section, *sections);
    if (!strings) return invalidElf(strings.takeError());
    for (size_t i = 0; i < symbols->size(); ++i) {
      const auto &s = (*symbols)[i];
      if (s.st_shndx == llvm::ELF::SHN_UNDEF || s.getBinding() == llvm::ELF::STB_LOCAL) continue;
      auto name = s.getName(*strings);
      if (!name) return invalidElf(name.takeError());
      if (!llvm::is_contained(names, std::string_view(name->data(), name->size()))) continue;
      // Its binding, in place: relocations and NVIDIA's sections refer to symbols by index, so
      // the table keeps its order.
      const size_t info = section.sh_offset + i * sizeof(llvm::object::ELF64LE::Sym) +
                          offsetof(llvm::object::ELF64LE::Sym, st_info);
      out[info] = static_cast<char>((llvm::ELF::STB_LOCAL << 4) | s.getType());
    }
    break;
  }
  return out;
}

}  // namespace devdl::readers
