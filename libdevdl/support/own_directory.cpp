#include "support/own_directory.h"

#include <dlfcn.h>

#include <string_view>

namespace devdl {

std::string ownDirectory() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<const void *>(&ownDirectory), &info) || !info.dli_fname) return ".";
  const std::string_view file = info.dli_fname;
  const size_t slash = file.find_last_of('/');
  if (slash == std::string_view::npos) return ".";
  return slash == 0 ? "/" : std::string(file.substr(0, slash));
}

}  // namespace devdl
