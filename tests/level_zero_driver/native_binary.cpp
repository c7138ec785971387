// The test driver's native binaries: its own (a module's SPIR-V, and PoCL's binary where the module
// was built alone), and Intel's from ocloc, taken for Gen12LP and run from the SPIR-V they carry.
#include "driver.h"

#include <llvm/Object/ELF.h>
#include <llvm/Support/Endian.h>
#include <llvm/Support/Error.h>

#include <cstring>
#include <string>
#include <vector>

namespace zetest {
namespace {

// --- the native binary: the module's SPIR-V, and PoCL's binary where it was built alone.
constexpr char kNativeMagic[8] = {'Z', 'E', 'T', 'E', 'S', 'T', 'N', 'B'};
struct NativeHeader {
  char magic[8];
  uint32_t version;
  uint32_t flags;  // 1 library, 2 global addresses, 4 linked
  uint64_t spirvBytes;
  uint64_t programBytes;  // PoCL's binary, where the module was built alone and has no variables
};

std::string programBinary(cl_program program) {
  size_t size = 0;
  if (clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) != CL_SUCCESS) return {};
  std::string binary(size, '\0');
  unsigned char *pointer = reinterpret_cast<unsigned char *>(binary.data());
  if (clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof pointer, &pointer, nullptr) != CL_SUCCESS) return {};
  return binary;
}

// An Intel native binary from ocloc (its ELF container): taken where it was built for this
// device's GPU family (Gen12LP: the Tiger Lake this driver reports), and run from the SPIR-V it
// carries (a test double cannot run Intel's GPU code), with the build options it was built with.
constexpr uint32_t kIntelOptions = 0xff000006, kIntelSpirv = 0xff000009, kIntelProgram = 0xff000005;
constexpr uint32_t kIntelProgramMagic = 0x494e5443, kGen12lp = 18;

std::string loadIntelNative(const uint8_t *bytes, size_t size, Module *module, ze_result_t *refusal) {
  auto file = llvm::object::ELF64LEFile::create(llvm::StringRef(reinterpret_cast<const char *>(bytes), size));
  if (!file) return "not a native binary of this device: " + llvm::toString(file.takeError());
  auto sections = file->sections();
  if (!sections) return "not a native binary of this device: " + llvm::toString(sections.takeError());
  std::string options;
  llvm::ArrayRef<uint8_t> spirv;
  uint32_t family = 0;
  for (const auto &section : *sections) {
    auto contents = file->getSectionContents(section);
    if (!contents) continue;
    if (section.sh_type == kIntelOptions) options.assign(contents->begin(), contents->end());
    if (section.sh_type == kIntelSpirv) spirv = *contents;
    if (section.sh_type == kIntelProgram && contents->size() >= 12 &&
        llvm::support::endian::read32le(contents->data()) == kIntelProgramMagic)
      family = llvm::support::endian::read32le(contents->data() + 8);
  }
  if (family != kGen12lp) {
    *refusal = ZE_RESULT_ERROR_INVALID_NATIVE_BINARY;
    return "the native binary is for GPU family " + std::to_string(family) + ", this device is Gen12LP (" +
           std::to_string(kGen12lp) + ")";
  }
  std::vector<std::vector<uint32_t>> inputs(1);
  if (std::string why = spirvInput(spirv.data(), spirv.size(), nullptr, &inputs[0]); !why.empty()) return why;
  module->library = hasOption(options.c_str(), "-library-compilation");
  module->globalAddresses = hasOption(options.c_str(), "-ze-take-global-address");
  return makeModule(inputs, module);
}

}  // namespace

std::string loadNative(const uint8_t *bytes, size_t size, Module *module, ze_result_t *refusal) {
  if (bytes && size >= 4 && std::memcmp(bytes, "\x7f" "ELF", 4) == 0) return loadIntelNative(bytes, size, module, refusal);
  NativeHeader header;
  if (!bytes || size < sizeof header) return "not a native binary of this device";
  std::memcpy(&header, bytes, sizeof header);
  if (std::memcmp(header.magic, kNativeMagic, 8) != 0 || header.version != 1 ||
      header.spirvBytes % 4 != 0 || header.spirvBytes > size - sizeof header ||
      header.programBytes != size - sizeof header - header.spirvBytes)
    return "not a native binary of this device";
  module->words.resize(header.spirvBytes / 4);
  std::memcpy(module->words.data(), bytes + sizeof header, header.spirvBytes);
  module->library = header.flags & 1;
  module->globalAddresses = header.flags & 2;
  if (std::string why = zetest::readLinkage(module->words, &module->linkage); !why.empty()) return why;
  if (!module->linkage.imports.empty() && !(header.flags & 4)) return {};  // unlinked until zeModuleDynamicLink
  module->linked = true;
  module->builtAlone = true;
  if (!header.programBytes) return buildSpirv(module->words, &module->built);
  return buildBinary({reinterpret_cast<const char *>(bytes) + sizeof header + header.spirvBytes, header.programBytes},
                     "", &module->built);
}

ze_result_t ZE_APICALL moduleGetNativeBinary(ze_module_handle_t handle, size_t *size, uint8_t *out) {
  const Module *module = asModule(handle);
  // PoCL's binary has the variables' addresses of this process in it: a module with variables
  // is built again from its SPIR-V.
  const bool whole = module->builtAlone && module->built && !module->built->variables;
  const std::string program = whole ? programBinary(module->built->program) : std::string();
  NativeHeader header{};
  std::memcpy(header.magic, kNativeMagic, 8);
  header.version = 1;
  header.flags = (module->library ? 1 : 0) | (module->globalAddresses ? 2 : 0) | (module->builtAlone ? 4 : 0);
  header.spirvBytes = module->words.size() * 4;
  header.programBytes = program.size();
  const size_t total = sizeof header + header.spirvBytes + header.programBytes;
  if (!out) {
    *size = total;
    return ZE_RESULT_SUCCESS;
  }
  if (*size < total) return ZE_RESULT_ERROR_INVALID_SIZE;
  std::memcpy(out, &header, sizeof header);
  std::memcpy(out + sizeof header, module->words.data(), header.spirvBytes);
  std::memcpy(out + sizeof header + header.spirvBytes, program.data(), program.size());
  *size = total;
  return ZE_RESULT_SUCCESS;
}

}  // namespace zetest
