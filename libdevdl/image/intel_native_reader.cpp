// Intel GPU native binaries as ocloc writes them (Debian 12's, 22.43): an ELF container of Intel's
// own type (e_type 0xff01-0xff05, no machine) holding the build options, the SPIR-V it was built
// from, and the device program ("INTC" header: version, GFX core family, ...); and zebin, which
// newer ocloc writes (e_machine EM_INTELGT) with the SPIR-V in a section of the same type. The
// device program's symbols are not readable apart from Intel's compiler, so devdl reads them from
// the SPIR-V the binary carries (ocloc keeps it unless told -exclude_ir).
#include "image/readers.h"
#include "support/error.h"

#include <llvm/Object/ELF.h>
#include <llvm/Support/Endian.h>

namespace devdl::readers {

namespace {

constexpr uint32_t kSectionSpirv = 0xff000009;          // "SPIRV Object"; zebin's .spv
constexpr uint32_t kSectionDeviceProgram = 0xff000005;  // "Intel(R) OpenCL Device Binary"
constexpr uint32_t kProgramMagic = 0x494e5443;          // "INTC"
constexpr uint16_t kMachineIntelGt = 205;               // EM_INTELGT (zebin), newer than LLVM 15

// GFX core families (Intel's GFXCORE_FAMILY) by the names ocloc gives them; others by number.
std::string coreFamilyName(uint32_t family) {
  switch (family) {
    case 12: return "gen9";
    case 13: return "gen10";
    case 14: return "gen11";
    case 18: return "gen12lp";
    case 0x0c05: return "xe_hp";
    case 0x0c07: return "xe_hpg";
    case 0x0c08: return "xe_hpc";
    default: return "gfxcore" + std::to_string(family);
  }
}

}  // namespace

bool isIntelNative(Bytes bytes) {
  if (bytes.size() < 64 || bytes[0] != 0x7f || bytes[1] != 'E' || bytes[2] != 'L' || bytes[3] != 'F' || bytes[4] != 2 ||
      bytes[5] != 1)
    return false;
  const uint16_t type = llvm::support::endian::read16le(bytes.data() + 16);
  const uint16_t machine = llvm::support::endian::read16le(bytes.data() + 18);
  return (machine == 0 && type >= 0xff01 && type <= 0xff05) || machine == kMachineIntelGt;
}

llvm::Error readIntelNative(DeviceImage &image) {
  auto file = llvm::object::ELF64LEFile::create(llvm::StringRef(asText(image.bytes)));
  if (!file) return fail(ErrorCode::BadFormat, "invalid Intel native binary: " + llvm::toString(file.takeError()));
  auto sections = file->sections();
  if (!sections) return fail(ErrorCode::BadFormat, "invalid Intel native binary: " + llvm::toString(sections.takeError()));
  Bytes spirv;
  std::string arch = file->getHeader().e_machine == kMachineIntelGt ? "intelgt" : "";
  for (const auto &section : *sections) {
    if (section.sh_type != kSectionSpirv && section.sh_type != kSectionDeviceProgram) continue;
    auto contents = file->getSectionContents(section);
    if (!contents) return fail(ErrorCode::BadFormat, "invalid Intel native binary: " + llvm::toString(contents.takeError()));
    if (section.sh_type == kSectionSpirv) {
      spirv = *contents;
    } else if (contents->size() >= 12 && llvm::support::endian::read32le(contents->data()) == kProgramMagic) {
      arch = coreFamilyName(llvm::support::endian::read32le(contents->data() + 8));
    }
  }
  if (arch.empty()) return fail(ErrorCode::BadFormat, "Intel native binary without a device program");
  if (spirv.empty())
    return fail(ErrorCode::Unsupported, "an Intel native binary (" + arch +
                                            ") without the SPIR-V it was built from (ocloc -exclude_ir): devdl reads "
                                            "its symbols from that");
  // The symbols and properties of the SPIR-V it carries, which the SPIR-V reader checks.
  DeviceImage carried;
  carried.format = ImageFormat::SpirV;
  carried.bytes = spirv;
  carried.storage = image.storage;
  if (llvm::Error err = readSpirv(carried))
    return fail(ErrorCode::BadFormat, "the SPIR-V in an Intel native binary: " + llvm::toString(std::move(err)));
  image.symbols = std::move(carried.symbols);
  image.propertySets = std::move(carried.propertySets);
  image.triple = "spir64_gen-unknown-unknown";
  image.arch = image.storage->save(arch);
  return llvm::Error::success();
}

}  // namespace devdl::readers
