#include "support/demangle.h"

#include <llvm/Demangle/Demangle.h>

#include <cstdlib>

namespace devdl {

namespace {

bool demanglable(std::string_view name) { return name.starts_with("_Z") && name.size() <= kMaxDemangledLength; }

}  // namespace

std::string demangle(std::string_view name) {
  if (!demanglable(name)) return std::string(name);
  return llvm::demangle(std::string(name));
}

std::optional<std::string> mangledBaseName(std::string_view name) {
  if (!demanglable(name)) return std::nullopt;
  const std::string mangled(name);  // the demangler keeps pointers into it
  llvm::ItaniumPartialDemangler demangler;
  if (demangler.partialDemangle(mangled.c_str())) return std::nullopt;
  char *base = demangler.getFunctionBaseName(nullptr, nullptr);
  if (!base) return std::nullopt;
  std::string out(base);
  std::free(base);
  return out;
}

}  // namespace devdl
