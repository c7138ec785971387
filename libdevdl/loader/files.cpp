#include "loader/files.h"
#include "support/environment.h"
#include "support/error.h"

#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringRef.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace devdl {

llvm::Expected<RegularFile> openNamedFile(const char *name) {
  if (std::strchr(name, '/')) return RegularFile::open(name);
  if (secureExecution())
    return inFile(fail(ErrorCode::NotFound, "a name without a slash is not looked for in a secure-execution "
                                            "(setuid) process: DEVDL_LIBRARY_PATH and the current directory "
                                            "are the invoking user's"),
                  name);
  const char *list = devdlVariable("DEVDL_LIBRARY_PATH");
  for (llvm::StringRef rest = list ? list : ""; !rest.empty();) {
    auto [dir, tail] = rest.split(':');
    rest = tail;
    if (dir.empty()) continue;
    std::string candidate = dir.str() + "/" + name;
    if (access(candidate.c_str(), R_OK) == 0) return RegularFile::open(candidate);
  }
  return RegularFile::open(name);
}

std::vector<std::string> preloadList(const char *list) {
  std::vector<std::string> items;
  llvm::SmallVector<llvm::StringRef, 8> parts;
  llvm::SplitString(list ? list : "", parts, " :");
  for (llvm::StringRef part : parts) items.push_back(part.str());
  return items;
}

}  // namespace devdl
