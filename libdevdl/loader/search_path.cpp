#include "loader/search_path.h"

#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringRef.h>

#include <sys/auxv.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace devdl {

std::string findFile(const char *path) {
  if (std::strchr(path, '/')) return path;
  const char *list = getauxval(AT_SECURE) ? nullptr : std::getenv("DEVDL_LIBRARY_PATH");
  for (llvm::StringRef rest = list ? list : ""; !rest.empty();) {
    auto [dir, tail] = rest.split(':');
    rest = tail;
    if (dir.empty()) continue;
    std::string candidate = dir.str() + "/" + path;
    if (access(candidate.c_str(), R_OK) == 0) return candidate;
  }
  return path;
}

std::vector<std::string> preloadList(const char *list) {
  std::vector<std::string> items;
  llvm::SmallVector<llvm::StringRef, 8> parts;
  llvm::SplitString(list ? list : "", parts, " :");
  for (llvm::StringRef part : parts) items.push_back(part.str());
  return items;
}

}  // namespace devdl
