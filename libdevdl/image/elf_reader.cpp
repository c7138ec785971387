// Device ELF objects (cubins, AMDGPU code objects) through LLVM Object: defined global functions
// and objects are exports, undefined globals imports, CUDA entry functions kernels.
#include "image/readers.h"
#include "support/error.h"

#include <llvm/BinaryFormat/ELF.h>
#include <llvm/Object/ELFObjectFile.h>

namespace devdl::readers {

namespace {

constexpr uint8_t kStoCudaEntry = 0x10;         // st_other bit nvcc sets on __global__ functions
constexpr uint8_t kSttCudaObject = 13;          // STT_LOPROC: nvcc's type for __device__ variables
constexpr unsigned kCudaAbiVersionNewFlags = 8;  // from this ABI version on, SM is in e_flags[15:8]

std::string cudaArch(const llvm::object::ELF64LEFile &elf) {
  const auto &header = elf.getHeader();
  unsigned sm = header.e_ident[llvm::ELF::EI_ABIVERSION] >= kCudaAbiVersionNewFlags
                    ? (header.e_flags >> 8) & 0xff
                    : header.e_flags & 0xff;
  return "sm_" + std::to_string(sm);
}

}  // namespace

llvm::Error readDeviceElf(DeviceImage &image) {
  llvm::MemoryBufferRef ref(llvm::StringRef(asText(image.bytes)), "");
  auto object = llvm::object::ELF64LEObjectFile::create(ref);
  if (!object)
    return fail(ErrorCode::BadFormat, "invalid device ELF: " + llvm::toString(object.takeError()));
  const auto &elf = object->getELFFile();
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

  for (const llvm::object::ELFSymbolRef sym : object->symbols()) {
    auto raw = object->getSymbol(sym.getRawDataRefImpl());
    if (!raw) return fail(ErrorCode::BadFormat, "invalid device ELF: " + llvm::toString(raw.takeError()));
    const auto &s = **raw;
    const uint8_t type = s.getType();
    // Section and file symbols are never exports or imports; LLVM 15 names a section symbol
    // after its section without checking the section index, so they are not even named.
    if (s.getBinding() == llvm::ELF::STB_LOCAL || type == llvm::ELF::STT_SECTION || type == llvm::ELF::STT_FILE)
      continue;
    auto nameOrErr = sym.getName();
    if (!nameOrErr)
      return fail(ErrorCode::BadFormat, "invalid device ELF: " + llvm::toString(nameOrErr.takeError()));
    std::string_view name(nameOrErr->data(), nameOrErr->size());
    if (s.st_shndx == llvm::ELF::SHN_UNDEF) {
      if (isImportableName(name)) image.symbols.push_back({name, SymbolKind::Import});
      continue;
    }
    if (type == llvm::ELF::STT_FUNC)
      image.symbols.push_back(
          {name, machine == llvm::ELF::EM_CUDA && (s.st_other & kStoCudaEntry) ? SymbolKind::Kernel
                                                                              : SymbolKind::Function});
    else if (type == llvm::ELF::STT_OBJECT || (machine == llvm::ELF::EM_CUDA && type == kSttCudaObject))
      image.symbols.push_back({name, SymbolKind::Variable});
  }
  return llvm::Error::success();
}

}  // namespace devdl::readers
