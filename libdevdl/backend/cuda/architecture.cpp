#include "backend/cuda/architecture.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringRef.h>

#include <optional>

namespace devdl::backend::cuda {

namespace {

// "sm_90", "compute_90", "lto_90", "sm_90a": the version (90) and the suffix ('a', 'f' or 0).
struct Arch {
  int version;
  char suffix;
};
std::optional<Arch> parseArch(llvm::StringRef arch) {
  if (!arch.consume_front("sm_") && !arch.consume_front("compute_") && !arch.consume_front("lto_"))
    return std::nullopt;
  char suffix = 0;
  if (!arch.empty() && (arch.back() == 'a' || arch.back() == 'f')) {
    suffix = arch.back();
    arch = arch.drop_back();
  }
  int version;
  if (arch.getAsInteger(10, version) || version <= 0) return std::nullopt;
  return Arch{version, suffix};
}

bool cubinRunsOn(const Arch &a, int sm) {
  if (a.suffix == 'a') return a.version == sm;
  return a.version / 10 == sm / 10 && a.version <= sm;
}

bool ptxRunsOn(const Arch &a, int sm) {
  if (a.suffix == 'a') return a.version == sm;
  if (a.suffix == 'f') return a.version / 10 == sm / 10 && a.version <= sm;
  return a.version <= sm;
}

}  // namespace

bool runsOn(ImageFormat format, std::string_view arch, int sm) {
  if (format == ImageFormat::Fatbin) {
    llvm::SmallVector<llvm::StringRef, 8> members;
    llvm::StringRef(arch.data(), arch.size()).split(members, ',', -1, false);
    // LTO-IR members are left out: nvcc puts PTX beside them, and only nvJitLink reads them.
    return llvm::any_of(members, [&](llvm::StringRef member) {
      return !member.startswith("lto_") &&
             runsOn(member.startswith("compute_") ? ImageFormat::Ptx : ImageFormat::Cubin, member, sm);
    });
  }
  auto parsed = parseArch(llvm::StringRef(arch.data(), arch.size()));
  if (!parsed) return false;
  if (format == ImageFormat::Cubin) return cubinRunsOn(*parsed, sm);
  if (format == ImageFormat::Ptx) return ptxRunsOn(*parsed, sm);
  return false;
}

const readers::FatbinMember *bestMember(std::span<const readers::FatbinMember> members, int sm, bool ptxOnly) {
  const readers::FatbinMember *best = nullptr;
  auto version = [](const readers::FatbinMember &m) { return parseArch(m.arch)->version; };
  for (const readers::FatbinMember &m : members) {
    if (m.format == ImageFormat::Unknown || !runsOn(m.format, m.arch, sm)) continue;
    if (ptxOnly && m.format != ImageFormat::Ptx) continue;
    const bool better = !best || (m.format == ImageFormat::Cubin && best->format == ImageFormat::Ptx) ||
                        (m.format == best->format && version(m) > version(*best));
    if (better) best = &m;
  }
  return best;
}

bool hasLtoIrFor(std::span<const readers::FatbinMember> members, int sm) {
  return llvm::any_of(members, [&](const readers::FatbinMember &m) {
    auto arch = parseArch(m.arch);  // LTO-IR compiles for its own and later versions, as PTX does
    return m.format == ImageFormat::LtoIr && arch && ptxRunsOn(*arch, sm);
  });
}

}  // namespace devdl::backend::cuda
