#include "backend/opencl/host_variables.h"
#include "support/debug.h"
#include "support/error.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace devdl::backend::opencl {

namespace {

// Where a program's region is put first: 64 MiB slots from 0x566000000000 to 0x568000000000,
// above where Linux puts a PIE executable and its heap (0x555555554000 and up to 1 TiB of
// randomization with the default vm.mmap_rnd_bits of 28; with more, they may lie there, and the
// slots they take are skipped) and below its mmap area; inside the application memory
// ThreadSanitizer allows, outside AddressSanitizer's shadow. The slot follows from the program,
// the next ones are tried where it is taken.
constexpr uint64_t kArenaStart = 0x566000000000, kSlot = 64ull << 20, kSlots = 2048, kTries = 64;

size_t pageRounded(uint64_t size) {
  const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return static_cast<size_t>((size + page - 1) / page * page);
}

// `bytes` mapped at exactly `address`; else Busy where the address is taken, Unsupported for
// another reason.
llvm::Expected<void *> mapAt(uint64_t address, size_t bytes) {
  void *wanted = reinterpret_cast<void *>(address);
  void *got = mmap(wanted, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (got == MAP_FAILED)
    return errno == EEXIST ? fail(ErrorCode::Busy, "it is taken") : fail(ErrorCode::Unsupported, std::strerror(errno));
  if (got != wanted) {  // a kernel before 4.17 takes the address as a hint: it is taken
    munmap(got, bytes);
    return fail(ErrorCode::Busy, "the kernel maps it elsewhere");
  }
  return got;
}

std::string hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%" PRIx64, value);
  return text;
}

constexpr char kMagic[8] = {'d', 'e', 'v', 'd', 'l', 'o', 'c', 'l'};
constexpr uint32_t kVersion = kStoredProgramVersion;

template <typename T>
void put(std::string &out, T value) {
  out.append(reinterpret_cast<const char *>(&value), sizeof value);
}

// Reads what storedProgram wrote, each read checked against what is left.
struct Reader {
  std::string_view rest;
  template <typename T>
  bool get(T &value) {
    if (rest.size() < sizeof value) return false;
    std::memcpy(&value, rest.data(), sizeof value);
    rest.remove_prefix(sizeof value);
    return true;
  }
  bool get(std::string &text, uint64_t size) {
    if (rest.size() < size) return false;
    text.assign(rest.substr(0, size));
    rest.remove_prefix(size);
    return true;
  }
};

}  // namespace

HostVariables::HostVariables(VariableLayout layout, void *base, size_t mapped)
    : layout_(std::move(layout)), base_(base), mapped_(mapped) {
  initialize();  // fresh pages: zero already
}

HostVariables::~HostVariables() { munmap(base_, mapped_); }

void HostVariables::initialize() {
  std::memcpy(base_, layout_.initial.data(), layout_.initial.size());
  for (const VariableLayout::Relocation &relocation : layout_.relocations) {
    const uint64_t value = address() + relocation.addend;
    std::memcpy(static_cast<char *>(base_) + relocation.at, &value, sizeof value);
  }
}

llvm::Expected<std::unique_ptr<HostVariables>> HostVariables::place(VariableLayout layout, uint64_t seed) {
  const size_t bytes = pageRounded(layout.size);
  for (uint64_t i = 0; i < kTries; ++i) {
    llvm::Expected<void *> base = mapAt(kArenaStart + (seed + i) % kSlots * kSlot, bytes);
    if (base) return std::unique_ptr<HostVariables>(new HostVariables(std::move(layout), *base, bytes));
    llvm::consumeError(base.takeError());  // the next slot
  }
  void *base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED)
    return fail(ErrorCode::Unsupported, "cannot map " + std::to_string(bytes) +
                                            " bytes of host memory for the program's variables: " + std::strerror(errno));
  if (Debug::get().on(Debug::Statistics))
    Debug::get().print("a program's variables placed at 0x" + hex(reinterpret_cast<uint64_t>(base)) +
                       ", where the kernel put them (no slot of theirs was free): its stored binary is of use to "
                       "a process where that address is free");
  return std::unique_ptr<HostVariables>(new HostVariables(std::move(layout), base, bytes));
}

llvm::Expected<std::unique_ptr<HostVariables>> HostVariables::at(VariableLayout layout, uint64_t address) {
  const size_t bytes = pageRounded(layout.size);
  llvm::Expected<void *> base = mapAt(address, bytes);
  if (!base) {
    llvm::Error why = base.takeError();
    const ErrorCode code = hasCode(why, ErrorCode::Busy) ? ErrorCode::Busy : ErrorCode::Unsupported;
    return fail(code, "the program's variables were placed at 0x" + hex(address) + " (" + std::to_string(bytes) +
                          " bytes), which cannot be mapped in this process: " + llvm::toString(std::move(why)));
  }
  return std::unique_ptr<HostVariables>(new HostVariables(std::move(layout), *base, bytes));
}

const VariableLayout::Variable *HostVariables::find(std::string_view name) const {
  for (const VariableLayout::Variable &variable : layout_.variables)
    if (variable.name == name) return &variable;
  return nullptr;
}

std::string storedProgram(const HostVariables *variables, std::string_view driverBinary) {
  static const VariableLayout kNone;
  const VariableLayout &layout = variables ? variables->layout() : kNone;
  std::string out(kMagic, sizeof kMagic);
  put(out, kVersion);
  put(out, static_cast<uint32_t>(layout.variables.size()));
  put(out, variables ? variables->address() : uint64_t{0});
  put(out, layout.size);
  put(out, static_cast<uint64_t>(layout.initial.size()));
  put(out, static_cast<uint64_t>(layout.relocations.size()));
  for (const VariableLayout::Relocation &relocation : layout.relocations) {
    put(out, relocation.at);
    put(out, relocation.addend);
  }
  for (const VariableLayout::Variable &variable : layout.variables) {
    put(out, variable.offset);
    put(out, variable.size);
    put(out, static_cast<uint32_t>(variable.name.size()));
    out += variable.name;
  }
  out += layout.initial;
  out += driverBinary;
  return out;
}

llvm::Expected<StoredProgram> readStoredProgram(std::string_view binary) {
  auto bad = [](const llvm::Twine &why) {
    return fail(ErrorCode::BadFormat, "not a program binary devdl stored for OpenCL: " + why);
  };
  if (binary.substr(0, sizeof kMagic) != std::string_view(kMagic, sizeof kMagic)) return bad("no magic");
  Reader in{binary.substr(sizeof kMagic)};
  uint32_t version = 0, count = 0;
  uint64_t address = 0, initialSize = 0, relocations = 0;
  VariableLayout layout;
  if (!in.get(version) || !in.get(count) || !in.get(address) || !in.get(layout.size) || !in.get(initialSize) ||
      !in.get(relocations))
    return bad("its header is cut short");
  if (version != kVersion) return bad("version " + llvm::Twine(version) + ", not " + llvm::Twine(kVersion));
  if (initialSize > layout.size) return bad("more initial bytes than its variables have");
  if (layout.size > kMaxRegion) return bad("a region of " + llvm::Twine(layout.size) + " bytes, more than devdl places");
  if ((address == 0) != (layout.size == 0))
    return bad("a region of " + llvm::Twine(layout.size) + " bytes at address 0x" + hex(address));
  if (address % 4096) return bad("address 0x" + hex(address) + ", not at the start of a page");
  for (uint64_t i = 0; i < relocations; ++i) {
    VariableLayout::Relocation &relocation = layout.relocations.emplace_back();
    if (!in.get(relocation.at) || !in.get(relocation.addend)) return bad("its relocations are cut short");
    if (layout.size < 8 || relocation.at > layout.size - 8) return bad("a relocation lies outside its region");
  }
  for (uint32_t i = 0; i < count; ++i) {
    VariableLayout::Variable &variable = layout.variables.emplace_back();
    uint32_t length = 0;
    if (!in.get(variable.offset) || !in.get(variable.size) || !in.get(length) || !in.get(variable.name, length))
      return bad("its variables are cut short");
    if (variable.offset > layout.size || variable.size > layout.size - variable.offset)
      return bad("variable `" + variable.name + "` lies outside its region");
  }
  if (!in.get(layout.initial, initialSize)) return bad("its initial bytes are cut short");
  StoredProgram stored;
  if (address) stored.variables.emplace(address, std::move(layout));
  stored.driverBinary = in.rest;
  return stored;
}

}  // namespace devdl::backend::opencl
