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

namespace {

// One search for a file by name: the places tried, for the error, and the first file of the name
// that could not be opened, and why.
struct Search {
  const char *name;
  bool saying;  // DEVDL_DEBUG=files
  std::vector<std::string> places;
  std::string refused;

  // As ld.so: a file of the name that cannot be opened (unreadable, not a regular file) is passed
  // over, and the search goes on.
  std::optional<RegularFile> in(llvm::StringRef dir) {
    const std::string candidate = dir.str() + "/" + name;
    if (saying) Debug::get().print("  trying file=" + candidate);
    auto opened = RegularFile::open(candidate);
    if (opened) return std::move(*opened);
    llvm::Error err = opened.takeError();
    if (!hasCode(err, ErrorCode::NotFound) && refused.empty()) refused = llvm::toString(std::move(err));
    else llvm::consumeError(std::move(err));
    return std::nullopt;
  }
  // The same for a directory of DEVDL_LIBRARY_PATH, as a run path's: a relative one would be the
  // current directory, where a bare name is never looked for; it is passed over, and said so.
  std::optional<RegularFile> inLibraryPath(llvm::StringRef dir) {
    if (llvm::sys::path::is_absolute(dir)) return in(dir);
    if (saying)
      Debug::get().print("  skipping " + dir.str() +
                         " of DEVDL_LIBRARY_PATH: a relative directory, never the current directory");
    places.back() += (places.back() == "DEVDL_LIBRARY_PATH" ? " (" : ", ") + dir.str() + " not searched: relative";
    return std::nullopt;
  }
};

}  // namespace

llvm::Expected<RegularFile> openNamedFile(const char *name, const Needer *needer) {
  const std::string needs = needer ? std::string(needer->name) + " needs " : "";
  if (std::strchr(name, '/')) {
    if (needer)
      return fail(ErrorCode::BadFormat, needs + name + ": a needed file's name holds no slash (its run path says where it is)");
    return RegularFile::open(name);
  }
  Search search{name, Debug::get().on(Debug::Files), {}, {}};
  if (search.saying)
    Debug::get().print("find file=" + std::string(name) + (needer ? "; needed by " + std::string(needer->name) : ""));
  if (needer)
    for (const RunPathDirectory &entry : runPathDirectories(*needer)) {
      if (entry.dir.empty()) {
        search.places.push_back(entry.text + " (not searched: " + entry.why + ")");
        continue;
      }
      search.places.push_back(entry.text == entry.dir ? entry.dir : entry.text + " (" + entry.dir + ")");
      if (auto found = search.in(entry.dir)) return std::move(*found);
    }
  if (const char *list = devdlVariable("DEVDL_LIBRARY_PATH"); list && *list) {
    search.places.push_back("DEVDL_LIBRARY_PATH");
    llvm::SmallVector<llvm::StringRef, 8> dirs;
    llvm::StringRef(list).split(dirs, ':', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef dir : dirs)
      if (auto found = search.inLibraryPath(dir)) return std::move(*found);
    if (search.places.back() != "DEVDL_LIBRARY_PATH") search.places.back() += ")";
  }
  const std::string installed = defaultLibraryDirectory();
  search.places.push_back(installed);
  if (auto found = search.in(installed)) return std::move(*found);
  std::string where = llvm::join(search.places, ", ");
  if (secureExecution()) where += " (DEVDL_LIBRARY_PATH is not used in a secure-execution process)";
  if (!search.refused.empty()) where += " (passed over: " + search.refused + ")";
  if (!needer) return inFile(fail(ErrorCode::NotFound, "not found in " + where), name);
  return fail(ErrorCode::NotFound, needs + name + ": not found in " + where);
}

}  // namespace devdl
