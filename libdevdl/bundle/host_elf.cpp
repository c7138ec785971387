#include "bundle/host_elf.h"
#include "support/error.h"
#include "support/xxh3.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/BinaryFormat/ELF.h>
#include <llvm/MC/MCAsmBackend.h>
#include <llvm/MC/MCAsmInfo.h>
#include <llvm/MC/MCCodeEmitter.h>
#include <llvm/MC/MCContext.h>
#include <llvm/MC/MCInstrInfo.h>
#include <llvm/MC/MCObjectFileInfo.h>
#include <llvm/MC/MCObjectWriter.h>
#include <llvm/MC/MCRegisterInfo.h>
#include <llvm/MC/MCSectionELF.h>
#include <llvm/MC/MCStreamer.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/MCTargetOptions.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/ObjCopy/ConfigManager.h>
#include <llvm/ObjCopy/ObjCopy.h>
#include <llvm/Object/Archive.h>
#include <llvm/BinaryFormat/Magic.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Support/Endian.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/TargetSelect.h>

#include <cstring>
#include <mutex>

namespace devdl::bundle {

namespace {

// The contents of the sections of `elf` that `wanted` picks, in section order.
template <typename ELFT, typename Pick>
llvm::Expected<std::vector<Bytes>> sectionsOf(const llvm::object::ELFFile<ELFT> &elf, Bytes file, Pick wanted) {
  auto sections = elf.sections();
  if (!sections) return sections.takeError();
  std::vector<Bytes> found;
  for (const auto &section : *sections) {
    auto name = elf.getSectionName(section);
    if (!name) return name.takeError();
    if (!wanted(section.sh_type, std::string_view(name->data(), name->size()))) continue;
    if (section.sh_type == llvm::ELF::SHT_NOBITS) continue;
    if (section.sh_offset > file.size() || section.sh_size > file.size() - section.sh_offset)
      return fail(ErrorCode::BadFormat, "section " + *name + " runs past the end of the file");
    found.push_back(file.subspan(section.sh_offset, section.sh_size));
  }
  return found;
}

template <typename Pick>
llvm::Expected<std::vector<Bytes>> sectionsOfElf(Bytes file, Pick wanted) {
  llvm::MemoryBufferRef ref(llvm::StringRef(asText(file)), "");
  auto object = llvm::object::ObjectFile::createELFObjectFile(ref);
  if (!object)
    return fail(ErrorCode::BadFormat, "invalid ELF: " + llvm::toString(object.takeError()));
  llvm::Expected<std::vector<Bytes>> found = std::vector<Bytes>();
  if (auto *o = llvm::dyn_cast<llvm::object::ELF64LEObjectFile>(object->get()))
    found = sectionsOf(o->getELFFile(), file, wanted);
  else if (auto *o = llvm::dyn_cast<llvm::object::ELF32LEObjectFile>(object->get()))
    found = sectionsOf(o->getELFFile(), file, wanted);
  else if (auto *o = llvm::dyn_cast<llvm::object::ELF64BEObjectFile>(object->get()))
    found = sectionsOf(o->getELFFile(), file, wanted);
  else if (auto *o = llvm::dyn_cast<llvm::object::ELF32BEObjectFile>(object->get()))
    found = sectionsOf(o->getELFFile(), file, wanted);
  if (!found) return fail(ErrorCode::BadFormat, "invalid ELF: " + llvm::toString(found.takeError()));
  return found;
}

void initializeTargets() {
  static std::once_flag once;
  std::call_once(once, [] {
#if DEVDL_NATIVE_TARGET_ONLY
    // The portable build links the host's target alone.
    LLVM_NATIVE_TARGETINFO();
    LLVM_NATIVE_TARGETMC();
#else
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargetMCs();
#endif
  });
}

}  // namespace

std::string defaultBundleSymbol(Bytes bundle) {
  uint8_t hash[8];  // in full width, most significant first
  llvm::support::endian::write64be(hash, xxh3::hash64(bundle.data(), bundle.size()));
  return std::string(kBundleSymbolPrefix) + llvm::toHex(hash, /*LowerCase=*/true);
}

bool isElf(Bytes bytes) {
  return bytes.size() >= 4 && std::memcmp(bytes.data(), "\x7f" "ELF", 4) == 0;
}

llvm::Expected<std::vector<Bytes>> findBundlesInElf(Bytes file) {
  return sectionsOfElf(file, [](uint32_t type, std::string_view name) {
    return type == llvm::ELF::SHT_LLVM_OFFLOADING || name == kSectionName;
  });
}

llvm::Expected<std::vector<Bytes>> findCudaFatbinSectionsInElf(Bytes file) {
  return sectionsOfElf(file, [](uint32_t, std::string_view name) {
    return name == ".nv_fatbin" || name == "__nv_relfatbin";
  });
}

llvm::Expected<std::vector<Bytes>> findRelocatableFatbinSectionsInElf(Bytes file) {
  return sectionsOfElf(file, [](uint32_t, std::string_view name) { return name == "__nv_relfatbin"; });
}

namespace {

// This machine's ELF e_machine: the registration object is compiled for it.
constexpr uint16_t kHostMachine =
#if defined(__x86_64__)
    llvm::ELF::EM_X86_64;
#elif defined(__aarch64__)
    llvm::ELF::EM_AARCH64;
#elif defined(__powerpc64__)
    llvm::ELF::EM_PPC64;
#else
    llvm::ELF::EM_NONE;
#endif

// The ELF object `bytes` is, read by LLVM's ELF reader alone: `createBinary` would also take
// an OffloadBinary's magic, and LLVM 15's reader of that trusts its header's offsets.
llvm::Expected<std::unique_ptr<llvm::object::ObjectFile>> elfObject(Bytes bytes, llvm::StringRef name) {
  return llvm::object::ObjectFile::createELFObjectFile(llvm::MemoryBufferRef(asText(bytes), name));
}

bool isModuleId(llvm::StringRef id) {
  return !id.empty() && llvm::all_of(id, [](char c) { return llvm::isAlnum(c) || c == '_'; });
}

llvm::Error addModuleIds(const llvm::object::ObjectFile &object, std::vector<std::string> &ids,
                         const std::string &name) {
  auto bad = [&](const llvm::Twine &why) { return fail(ErrorCode::BadFormat, name + ": " + why); };
  const uint16_t machine = llvm::cast<llvm::object::ELFObjectFileBase>(object).getEMachine();
  if (kHostMachine != llvm::ELF::EM_NONE && machine != kHostMachine)
    return bad("an object for another machine (ELF machine " + llvm::Twine(machine) + ") than this one's");
  for (const llvm::object::SymbolRef &symbol : object.symbols()) {
    auto flags = symbol.getFlags();
    if (!flags) return bad(llvm::toString(flags.takeError()));
    if (!(*flags & llvm::object::SymbolRef::SF_Undefined)) continue;
    auto symbolName = symbol.getName();
    if (!symbolName) return bad(llvm::toString(symbolName.takeError()));
    if (!symbolName->startswith(kCudaRegisterPrefix)) continue;
    if (!isModuleId(symbolName->drop_front(kCudaRegisterPrefix.size())))
      return bad("`" + *symbolName + "` names no module id nvcc writes (letters, digits and '_')");
    if (llvm::find(ids, *symbolName) == ids.end()) ids.push_back(symbolName->str());
  }
  return llvm::Error::success();
}

// The target of `triple` (spelled `tripleStr`), which must write ELF objects.
llvm::Expected<const llvm::Target *> elfTarget(const llvm::Triple &triple, const std::string &tripleStr) {
  if (!triple.isOSBinFormatELF())
    return fail(ErrorCode::Unsupported, "target " + tripleStr + " does not use ELF objects");
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(tripleStr, error);
  if (!target) return fail(ErrorCode::Unsupported, "target " + tripleStr + ": " + error);
  return target;
}

// SHF_GNU_RETAIN keeps both sections under --gc-sections: nothing refers to them in code.
constexpr unsigned kRetainedSectionFlags = llvm::ELF::SHF_ALLOC | llvm::ELF::SHF_GNU_RETAIN;

// The bundle's section: the bundle under the global `symbolName`. Returns the local label at its
// start, which the note refers to.
llvm::MCSymbol *emitBundle(llvm::MCStreamer &out, llvm::MCContext &ctx, Bytes bundle, std::string_view symbolName) {
  out.switchSection(
      ctx.getELFSection(std::string(kSectionName), llvm::ELF::SHT_LLVM_OFFLOADING, kRetainedSectionFlags));
  out.emitValueToAlignment(8);
  // The note refers to a local label: a PC-relative reference to the global symbol would need
  // a dynamic relocation in a shared library, since the global could be interposed.
  llvm::MCSymbol *start = ctx.createTempSymbol("devdl_bundle_start");
  llvm::MCSymbol *global = ctx.getOrCreateSymbol(llvm::StringRef(symbolName.data(), symbolName.size()));
  out.emitSymbolAttribute(global, llvm::MCSA_Global);
  out.emitSymbolAttribute(global, llvm::MCSA_ELF_TypeObject);
  out.emitLabel(start);
  out.emitLabel(global);
  out.emitBytes(llvm::StringRef(asText(bundle)));
  out.emitELFSize(global, llvm::MCConstantExpr::create(bundle.size(), ctx));
  return start;
}

// The note that finds the bundle: its offset from the note's descriptor, and its size.
void emitBundleNote(llvm::MCStreamer &out, llvm::MCContext &ctx, llvm::MCSymbol *start, size_t bundleSize) {
  out.switchSection(ctx.getELFSection(std::string(kNoteSectionName), llvm::ELF::SHT_NOTE, kRetainedSectionFlags));
  out.emitValueToAlignment(4);
  out.emitIntValue(kNoteName.size() + 1, 4);
  out.emitIntValue(kNoteDescSize, 4);
  out.emitIntValue(kNoteTypeBundle, 4);
  out.emitBytes(llvm::StringRef(kNoteName.data(), kNoteName.size()));
  out.emitIntValue(0, 1);
  out.emitValueToAlignment(4);
  llvm::MCSymbol *desc = ctx.createTempSymbol("devdl_note_desc");
  out.emitLabel(desc);
  out.emitValue(llvm::MCBinaryExpr::createSub(llvm::MCSymbolRefExpr::create(start, ctx),
                                              llvm::MCSymbolRefExpr::create(desc, ctx), ctx),
                8);
  out.emitIntValue(bundleSize, 8);
}

}  // namespace

llvm::Expected<std::vector<ArchiveMember>> archiveMembers(Bytes archive) {
  auto opened = llvm::object::Archive::create(llvm::MemoryBufferRef(asText(archive), ""));
  if (!opened) return fail(ErrorCode::BadFormat, "not a static library: " + llvm::toString(opened.takeError()));
  std::vector<ArchiveMember> members;
  llvm::Error err = llvm::Error::success();
  for (const llvm::object::Archive::Child &child : (*opened)->children(err)) {
    auto name = child.getName();
    if (!name) {
      llvm::consumeError(std::move(err));
      return fail(ErrorCode::BadFormat, "member " + llvm::Twine(members.size()) + ": " + llvm::toString(name.takeError()));
    }
    auto bytes = child.getBuffer();
    if (!bytes) {
      llvm::consumeError(std::move(err));
      return fail(ErrorCode::BadFormat, "member " + *name + ": " + llvm::toString(bytes.takeError()));
    }
    members.push_back({name->str(), asBytes(std::string_view(bytes->data(), bytes->size()))});
  }
  if (err) return fail(ErrorCode::BadFormat, llvm::toString(std::move(err)));
  return members;
}

llvm::Expected<std::vector<std::string>> cudaModuleIds(Bytes file) {
  std::vector<std::string> ids;
  if (llvm::identify_magic(asText(file)) != llvm::file_magic::archive) {
    if (!isElf(file)) return fail(ErrorCode::BadFormat, "neither an ELF object nor a static library");
    auto object = elfObject(file, "");
    if (!object) return fail(ErrorCode::BadFormat, llvm::toString(object.takeError()));
    if (llvm::Error err = addModuleIds(**object, ids, "the object")) return err;
    return ids;
  }
  auto members = archiveMembers(file);
  if (!members) return members.takeError();
  for (const ArchiveMember &member : *members) {
    // A member that is no ELF object (bitcode, text) carries no device code.
    if (!isElf(member.bytes)) continue;
    const std::string name = "member " + member.name;
    auto object = elfObject(member.bytes, member.name);
    if (!object) return fail(ErrorCode::BadFormat, name + ": " + llvm::toString(object.takeError()));
    if (llvm::Error err = addModuleIds(**object, ids, name)) return err;
  }
  return ids;
}

llvm::Expected<std::vector<Bytes>> findDpcppImageSectionsInElf(Bytes file) {
  return sectionsOfElf(file, [](uint32_t, std::string_view name) {
    return name.starts_with("__CLANG_OFFLOAD_BUNDLE__sycl");
  });
}

llvm::Expected<std::string> makeHostObject(Bytes bundle, std::string_view tripleName,
                                           std::string_view symbolName) {
  initializeTargets();
  const std::string tripleStr =
      tripleName.empty() ? llvm::sys::getDefaultTargetTriple() : std::string(tripleName);
  llvm::Triple triple(tripleStr);
  auto found = elfTarget(triple, tripleStr);
  if (!found) return found.takeError();
  const llvm::Target *target = *found;

  llvm::MCTargetOptions options;
  std::unique_ptr<llvm::MCRegisterInfo> regInfo(target->createMCRegInfo(tripleStr));
  std::unique_ptr<llvm::MCAsmInfo> asmInfo(target->createMCAsmInfo(*regInfo, tripleStr, options));
  std::unique_ptr<llvm::MCSubtargetInfo> subtarget(target->createMCSubtargetInfo(tripleStr, "", ""));
  std::unique_ptr<llvm::MCInstrInfo> instrInfo(target->createMCInstrInfo());
  if (!regInfo || !asmInfo || !subtarget || !instrInfo)
    return fail(ErrorCode::Unsupported, "target " + tripleStr + " has no object writer");
  llvm::MCContext ctx(triple, asmInfo.get(), regInfo.get(), subtarget.get());
  std::unique_ptr<llvm::MCObjectFileInfo> fileInfo(target->createMCObjectFileInfo(ctx, /*PIC=*/true));
  ctx.setObjectFileInfo(fileInfo.get());

  llvm::SmallString<0> buffer;
  llvm::raw_svector_ostream os(buffer);
  std::unique_ptr<llvm::MCAsmBackend> backend(target->createMCAsmBackend(*subtarget, *regInfo, options));
  if (!backend) return fail(ErrorCode::Unsupported, "target " + tripleStr + " has no object writer");
  auto writer = backend->createObjectWriter(os);
  std::unique_ptr<llvm::MCStreamer> out(target->createMCObjectStreamer(
      triple, ctx, std::move(backend), std::move(writer),
      std::unique_ptr<llvm::MCCodeEmitter>(target->createMCCodeEmitter(*instrInfo, ctx)), *subtarget,
      /*RelaxAll=*/false, /*IncrementalLinkerCompatible=*/false, /*DWARFMustBeAtTheEnd=*/false));
  out->initSections(false, *subtarget);

  llvm::MCSymbol *start = emitBundle(*out, ctx, bundle, symbolName);
  // Without this marker, linkers give whatever links the object an executable stack.
  out->switchSection(asmInfo->getNonexecutableStackSection(ctx));
  emitBundleNote(*out, ctx, start, bundle.size());
  out->finish();
  return std::string(buffer.str());
}

llvm::Expected<std::string> addBundleToElf(Bytes elf, Bytes bundle) {
  if (!isElf(elf)) return fail(ErrorCode::BadFormat, "not an ELF file");
  auto binary = elfObject(elf, "");
  if (!binary) return fail(ErrorCode::BadFormat, "invalid ELF: " + llvm::toString(binary.takeError()));
  llvm::objcopy::ConfigManager config;
  config.Common.AddSection.emplace_back(
      llvm::StringRef(kSectionName.data(), kSectionName.size()),
      llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(asText(bundle))));
  config.Common.SetSectionType[llvm::StringRef(kSectionName.data(), kSectionName.size())] =
      llvm::ELF::SHT_LLVM_OFFLOADING;
  std::string result;
  llvm::raw_string_ostream os(result);
  if (llvm::Error err = llvm::objcopy::executeObjcopyOnBinary(config, **binary, os))
    return fail(ErrorCode::BadFormat, "cannot add the bundle: " + llvm::toString(std::move(err)));
  os.flush();
  return result;
}

}  // namespace devdl::bundle
