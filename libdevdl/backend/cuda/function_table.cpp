#include "backend/cuda/function_table.h"

#include "support/error.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/Twine.h>

#include <cstring>
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

}  // namespace

std::string functionTablePtx(std::span<const std::string_view> functions) {
  std::vector<std::string_view> named;
  for (std::string_view name : functions)
    if (ptxIdentifier(name)) named.push_back(name);
  if (named.empty()) return "";
  // PTX 7.0 for sm_50 JIT-compiles for any later GPU. Declarations without their parameters:
  // the linker binds by name.
  std::string ptx = "// devdl's table of this program's functions (libdevdl/backend/cuda/function_table.h)\n"
                    ".version 7.0\n.target sm_50\n.address_size 64\n\n";
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
