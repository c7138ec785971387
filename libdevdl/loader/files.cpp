#include "loader/files.h"
#include "support/debug.h"
#include "support/environment.h"
#include "support/error.h"
#include "support/own_directory.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>

#include <cstdlib>
#include <cstring>
#include <optional>

namespace devdl {

namespace {

// Set once, by a tool's main, before any thread is started (useDefaultLibraryDirectory).
std::string *chosenLibraryDirectory = nullptr;

/// One directory of a run path as recorded, and where it is searched: `dir` empty where it is not,
/// with `why` for the error.
struct RunPathDirectory {
  std::string text;
  std::string dir;
  std::string why;
};

bool within(llvm::StringRef dir, llvm::StringRef root) {
  return dir == root || (dir.startswith(root) && dir[root.size()] == '/');
}

/// The directories of `needer`'s run path, $ORIGIN (or ${ORIGIN}) made the directory of its file.
std::vector<RunPathDirectory> runPathDirectories(const Needer &needer) {
  std::vector<RunPathDirectory> out;
  llvm::SmallVector<llvm::StringRef, 4> texts;
  llvm::StringRef(needer.runPath.data(), needer.runPath.size()).split(texts, ':', -1, /*KeepEmpty=*/false);
  const llvm::StringRef file = needer.isFile ? llvm::StringRef(needer.name.data(), needer.name.size()) : "";
  for (llvm::StringRef text : texts) {
    RunPathDirectory entry{text.str(), {}, {}};
    size_t origins = 0;
    std::string dir;
    for (llvm::StringRef rest = text; !rest.empty();) {
      if (rest.consume_front("$ORIGIN") || rest.consume_front("${ORIGIN}")) {
        ++origins;
        const llvm::StringRef parent = llvm::sys::path::parent_path(file);
        dir += parent.empty() ? "." : parent.str();
        continue;
      }
      dir += rest.front();
      rest = rest.drop_front();
    }
    const bool leadingOrigin = text.startswith("$ORIGIN") || text.startswith("${ORIGIN}");
    if (origins && !needer.isFile) {
      entry.why = "no file: opened from memory";
    } else if (!origins && !llvm::sys::path::is_absolute(dir)) {
      entry.why = "a relative directory: never the current directory";
    } else if (origins && secureExecution()) {
      // As glibc: $ORIGIN alone at the start, and the directory among the trusted ones.
      llvm::SmallString<256> absolute(dir);
      llvm::sys::fs::make_absolute(absolute);
      llvm::sys::path::remove_dots(absolute, /*remove_dot_dot=*/true);
      if (origins > 1 || !leadingOrigin || !within(absolute, defaultLibraryDirectory()))
        entry.why = "$ORIGIN outside " + defaultLibraryDirectory() + " in a secure-execution process";
    }
    if (entry.why.empty()) entry.dir = std::move(dir);
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace

std::string defaultLibraryDirectory() {
  return chosenLibraryDirectory ? *chosenLibraryDirectory : ownDirectory() + "/devdl";
}

void useDefaultLibraryDirectory(std::string dir) { chosenLibraryDirectory = new std::string(std::move(dir)); }

llvm::Expected<RegularFile> openNamedFile(const char *name, const Needer *needer) {
  const std::string needs = needer ? std::string(needer->name) + " needs " : "";
  if (std::strchr(name, '/')) {
    if (needer)
      return fail(ErrorCode::BadFormat, needs + name + ": a needed file's name holds no slash (its run path says where it is)");
    return RegularFile::open(name);
  }
  const bool saying = Debug::get().on(Debug::Files);
  if (saying) Debug::get().print("find file=" + std::string(name) + (needer ? "; needed by " + std::string(needer->name) : ""));
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
  if (needer)
    for (const RunPathDirectory &entry : runPathDirectories(*needer)) {
      if (entry.dir.empty()) {
        places.push_back(entry.text + " (not searched: " + entry.why + ")");
        continue;
      }
      places.push_back(entry.text == entry.dir ? entry.dir : entry.text + " (" + entry.dir + ")");
      if (auto found = tryIn(entry.dir)) return std::move(*found);
    }
  if (const char *list = devdlVariable("DEVDL_LIBRARY_PATH"); list && *list) {
    places.push_back("DEVDL_LIBRARY_PATH");
    llvm::SmallVector<llvm::StringRef, 8> dirs;
    llvm::StringRef(list).split(dirs, ':', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef dir : dirs) {
      // As a run path's: a relative directory would be the current one's, where a bare name is
      // never looked for.
      if (!llvm::sys::path::is_absolute(dir)) {
        if (saying) Debug::get().print("  skipping " + dir.str() + " of DEVDL_LIBRARY_PATH: a relative directory, never the current directory");
        places.back() += (places.back() == "DEVDL_LIBRARY_PATH" ? " (" : ", ") + dir.str() + " not searched: relative";
        continue;
      }
      if (auto found = tryIn(dir)) return std::move(*found);
    }
    if (places.back() != "DEVDL_LIBRARY_PATH") places.back() += ")";
  }
  const std::string installed = defaultLibraryDirectory();
  places.push_back(installed);
  if (auto found = tryIn(installed)) return std::move(*found);
  std::string where = llvm::join(places, ", ");
  if (secureExecution()) where += " (DEVDL_LIBRARY_PATH is not used in a secure-execution process)";
  if (!refused.empty()) where += " (passed over: " + refused + ")";
  if (!needer) return inFile(fail(ErrorCode::NotFound, "not found in " + where), name);
  return fail(ErrorCode::NotFound, needs + name + ": not found in " + where);
}

std::vector<std::string> preloadList(const char *list) {
  std::vector<std::string> items;
  llvm::SmallVector<llvm::StringRef, 8> parts;
  llvm::SplitString(list ? list : "", parts, " :");
  for (llvm::StringRef part : parts) items.push_back(part.str());
  return items;
}

}  // namespace devdl
