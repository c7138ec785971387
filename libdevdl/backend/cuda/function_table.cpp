#include "backend/cuda/function_table.h"

#include "support/error.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringSet.h>
#include <llvm/ADT/Twine.h>
#include <llvm/Object/ELF.h>

#include <cstring>
#include <utility>
#include <vector>

namespace devdl::backend::cuda {

namespace {

// PTX's identifiers: a letter, '_', '$' or '%', then letters, digits, '_' and '$'.
bool ptxIdentifier(std::string_view name) {
  if (name.empty() || !(llvm::isAlpha(name[0]) || name[0] == '_' || name[0] == '$' || name[0] == '%')) return false;
  for (char c : name.substr(1))
    if (!(llvm::isAlnum(c) || c == '_' || c == '$')) return false;
  return true;
}

// The relocation type of a call (R_CUDA_ABS47_34 in sm_70 and later code); the others against a
// function take its address, but for those of its own code (a call's return address).
constexpr uint32_t kCallRelocation = 0x4b;

bool cubinTakesFunctionAddresses(Bytes data) {
  auto file = llvm::object::ELF64LEFile::create(llvm::StringRef(asText(data)));
  if (!file) {
    llvm::consumeError(file.takeError());
    return true;
  }
  auto sections = file->sections();
  if (!sections) {
    llvm::consumeError(sections.takeError());
    return true;
  }
  for (const auto &section : *sections) {
    if (section.sh_type != llvm::ELF::SHT_RELA && section.sh_type != llvm::ELF::SHT_REL) continue;
    auto target = file->getSection(section.sh_info);
    auto targetName = target ? file->getSectionName(**target) : target.takeError();
    auto symbols = file->getSection(section.sh_link);
    if (!targetName || !symbols) {
      if (!targetName) llvm::consumeError(targetName.takeError());
      if (!symbols) llvm::consumeError(symbols.takeError());
      return true;
    }
    if (targetName->startswith(".debug") || targetName->startswith(".nv.debug")) continue;
    // Code of function F is in .text.F: relocations there against F are its own.
    const llvm::StringRef own = targetName->startswith(".text.") ? targetName->drop_front(6) : "";
    auto isAddressOfAFunction = [&](uint32_t symbolIndex, uint32_t type) {
      if (type == kCallRelocation) return false;
      auto symbol = file->getSymbol(*symbols, symbolIndex);
      if (!symbol) {
        llvm::consumeError(symbol.takeError());
        return true;
      }
      if ((*symbol)->getType() != llvm::ELF::STT_FUNC) return false;
      auto strings = file->getStringTableForSymtab(**symbols);
      auto name = strings ? (*symbol)->getName(*strings) : strings.takeError();
      if (!name) {
        llvm::consumeError(name.takeError());
        return true;
      }
      return *name != own;
    };
    // The same over REL and RELA entries.
    auto anyTakes = [&](auto relocations) {
      if (!relocations) {
        llvm::consumeError(relocations.takeError());
        return true;
      }
      for (const auto &relocation : *relocations)
        if (isAddressOfAFunction(relocation.getSymbol(false), relocation.getType(false))) return true;
      return false;
    };
    if (section.sh_type == llvm::ELF::SHT_RELA ? anyTakes(file->relas(section)) : anyTakes(file->rels(section)))
      return true;
  }
  return false;
}

// The names PTX declares with .func, then whether one is an operand of a statement other than a
// call or a declaration: `mov.u64 %rd1, f;`, `.global .u64 p = f;`. Statements end at ';', '{'
// and '}' (nvcc writes a call's operands on lines of their own).
bool ptxTakesFunctionAddresses(std::string_view text) {
  std::string code;  // without comments
  for (llvm::StringRef rest(text.data(), text.size()); !rest.empty();) {
    auto [line, next] = rest.split('\n');
    code += line.split("//").first;
    code += ' ';
    rest = next;
  }
  llvm::SmallVector<llvm::StringRef, 0> statements;
  for (llvm::StringRef rest = code; !rest.empty();) {
    const size_t end = rest.find_first_of(";{}");
    statements.push_back(rest.take_front(end));
    rest = end == llvm::StringRef::npos ? "" : rest.drop_front(end + 1);
  }
  auto identifiers = [](llvm::StringRef statement) {
    llvm::SmallVector<llvm::StringRef, 8> out;
    for (size_t i = 0; i < statement.size();) {
      if (!(llvm::isAlpha(statement[i]) || statement[i] == '_' || statement[i] == '$')) {
        ++i;
        continue;
      }
      size_t end = i + 1;
      while (end < statement.size() && (llvm::isAlnum(statement[end]) || statement[end] == '_' || statement[end] == '$'))
        ++end;
      if (i == 0 || (statement[i - 1] != '%' && statement[i - 1] != '.')) out.push_back(statement.slice(i, end));
      i = end;
    }
    return out;
  };
  // A declaration's name is its last identifier before its parameters: `.func (.param .b32 r) f (`.
  llvm::StringSet<> functions;
  for (llvm::StringRef statement : statements)
    if (const size_t at = statement.find(".func"); at != llvm::StringRef::npos) {
      llvm::StringRef head = statement.drop_front(at + 5);
      if (head.ltrim().startswith("(")) head = head.ltrim().drop_front().split(')').second;  // its return value
      if (auto names = identifiers(head.split('(').first); !names.empty()) functions.insert(names.front());
    }
  if (functions.empty()) return false;
  for (llvm::StringRef statement : statements) {
    if (statement.contains(".func") || statement.contains("call")) continue;
    for (llvm::StringRef name : identifiers(statement))
      if (functions.contains(name)) return true;
  }
  return false;
}

}  // namespace

bool takesFunctionAddresses(Bytes data, bool ptx) {
  return ptx ? ptxTakesFunctionAddresses(asText(data)) : cubinTakesFunctionAddresses(data);
}

std::string ptxHeader(int sm) {
  // Each target's first PTX ISA version; a target devdl does not know takes its predecessor's.
  static constexpr std::pair<int, const char *> kFirstIsa[] = {
      {121, "8.8"}, {120, "8.7"}, {110, "9.0"}, {103, "8.8"}, {100, "8.6"}, {90, "7.8"}, {89, "7.8"},
      {87, "7.4"},  {86, "7.1"},  {80, "7.0"},  {75, "6.3"},  {72, "6.1"},  {70, "6.0"}, {60, "5.0"}};
  const char *isa = "4.0";
  int target = sm < 50 ? 50 : sm;
  for (const auto &[known, version] : kFirstIsa)
    if (known <= target) {
      isa = version;
      break;
    }
  std::string header = ".version ";
  header += isa;
  header += "\n.target sm_" + std::to_string(target) + "\n.address_size 64\n\n";
  return header;
}

std::string functionTablePtx(std::span<const std::string_view> functions, int sm) {
  std::vector<std::string_view> named;
  for (std::string_view name : functions)
    if (ptxIdentifier(name)) named.push_back(name);
  if (named.empty()) return "";
  // Declarations without their parameters: the linker binds by name.
  std::string ptx = "// devdl's table of this program's functions (libdevdl/backend/cuda/function_table.h)\n" +
                    ptxHeader(sm);
  for (std::string_view name : named) ptx += ".extern .func " + std::string(name) + ";\n";
  ptx += ".visible .global .align 8 .u64 " + std::string(kFunctionAddresses) + "[" + std::to_string(named.size()) + "] = {";
  for (size_t i = 0; i < named.size(); ++i) ptx += (i ? ", " : "") + std::string(named[i]);
  std::string bytes;
  for (std::string_view name : named) (bytes += name) += '\0';
  ptx += "};\n.visible .global .align 1 .b8 " + std::string(kFunctionNames) + "[" + std::to_string(bytes.size()) + "] = {";
  for (size_t i = 0; i < bytes.size(); ++i) ptx += (i ? "," : "") + std::to_string(static_cast<unsigned char>(bytes[i]));
  return ptx + "};\n";
}

llvm::Expected<llvm::StringMap<void *>> readFunctionTable(std::string_view addresses, std::string_view names) {
  std::vector<std::string_view> named;
  for (std::string_view rest = names; !rest.empty();) {
    const size_t end = rest.find('\0');
    if (end == std::string_view::npos) return fail(ErrorCode::BadFormat, "the function table's last name is not ended");
    named.push_back(rest.substr(0, end));
    rest.remove_prefix(end + 1);
  }
  if (named.size() * 8 != addresses.size())
    return fail(ErrorCode::BadFormat, "the function table holds " + llvm::Twine(addresses.size() / 8) +
                                          " addresses for " + llvm::Twine(named.size()) + " names");
  llvm::StringMap<void *> table;
  for (size_t i = 0; i < named.size(); ++i) {
    uint64_t address = 0;
    std::memcpy(&address, addresses.data() + i * 8, 8);
    table[named[i]] = reinterpret_cast<void *>(static_cast<uintptr_t>(address));
  }
  return table;
}

}  // namespace devdl::backend::cuda
