#include "loader/files.h"
#include "support/debug.h"
#include "support/environment.h"
#include "support/error.h"
#include "support/own_directory.h"

#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringRef.h>

#include <cstdlib>
#include <cstring>
#include <optional>

namespace devdl {

std::string defaultLibraryDirectory() { return ownDirectory() + "/devdl"; }

llvm::Expected<RegularFile> openNamedFile(const char *name) {
  if (std::strchr(name, '/')) return RegularFile::open(name);
  const bool saying = Debug::get().on(Debug::Files);
  if (saying) Debug::get().print("find file=" + std::string(name));
  std::vector<std::string> places;  // for the error
  std::string refused;              // the first file of the name that could not be opened, and why
  // As ld.so: a file of the name that cannot be opened (unreadable, not a regular file) is passed
  // over, and the search goes on.
  auto tryIn = [&](llvm::StringRef dir) -> std::optional<RegularFile> {
    const std::string candidate = dir.str() + "/" + name;
    if (saying) Debug::get().print("  trying file=" + candidate);
    auto opened = RegularFile::open(candidate);
    if (opened) return std::move(*opened);
    llvm::Error err = opened.takeError();
    if (!hasCode(err, ErrorCode::NotFound) && refused.empty()) refused = llvm::toString(std::move(err));
    else llvm::consumeError(std::move(err));
    return std::nullopt;
  };
  if (const char *list = devdlVariable("DEVDL_LIBRARY_PATH"); list && *list) {
    places.push_back("DEVDL_LIBRARY_PATH");
    llvm::SmallVector<llvm::StringRef, 8> dirs;
    llvm::StringRef(list).split(dirs, ':', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef dir : dirs)
      if (auto found = tryIn(dir)) return std::move(*found);
  }
  const std::string installed = defaultLibraryDirectory();
  places.push_back(installed);
  if (auto found = tryIn(installed)) return std::move(*found);
  std::string where = llvm::join(places, ", ");
  if (secureExecution()) where += " (DEVDL_LIBRARY_PATH is not used in a secure-execution process)";
  if (!refused.empty()) where += " (passed over: " + refused + ")";
  return inFile(fail(ErrorCode::NotFound, "not found in " + where), name);
}

std::vector<std::string> preloadList(const char *list) {
  std::vector<std::string> items;
  llvm::SmallVector<llvm::StringRef, 8> parts;
  llvm::SplitString(list ? list : "", parts, " :");
  for (llvm::StringRef part : parts) items.push_back(part.str());
  return items;
}

}  // namespace devdl
