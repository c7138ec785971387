// devdl-cache: lists, verifies and clears the disk cache of linked programs, the one
// device_dlopen uses with the same environment (DEVDL_CACHE_DIR, XDG_CACHE_HOME, HOME).
//
//   devdl-cache list     each entry: key, size, last use, whether it verifies, what it holds
//   devdl-cache verify   the entries that would not be used, and why; exit 1 if there are any
//   devdl-cache clear    deletes every entry (and temporary files of killed writers)
//
// A directory that cannot be read, or files clear cannot delete, are errors (exit status 1);
// a directory that does not exist is an empty cache.
#include "backend/backend.h"
#include "backend/spirv/translation.h"
#include "store/disk_cache.h"
#include "support/version.h"

#include <llvm/Support/CommandLine.h>
#include <llvm/Support/raw_ostream.h>

#include <ctime>
#include <string>

using devdl::store::DiskCache;
using devdl::store::EntryFile;

namespace {

llvm::cl::OptionCategory category("devdl-cache options");
llvm::cl::opt<std::string> command(llvm::cl::Positional, llvm::cl::desc("list | verify | clear"), llvm::cl::Required,
                                   llvm::cl::cat(category));
llvm::cl::opt<std::string> directory("dir", llvm::cl::desc("The cache directory (default: as devdl finds it)"),
                                     llvm::cl::value_desc("DIR"), llvm::cl::cat(category));

std::string timeText(int64_t seconds) {
  const std::time_t t = seconds;
  std::tm local{};
  localtime_r(&t, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M", &local);
  return text;
}

// "device: image, image" from the entry's description (the device, then a label per line).
std::string contents(const std::string &description) {
  std::string text;
  size_t start = 0;
  for (size_t line = 0; start <= description.size(); ++line) {
    const size_t end = std::min(description.find('\n', start), description.size());
    text += (line == 0 ? "" : line == 1 ? ": " : ", ") + description.substr(start, end - start);
    start = end + 1;
  }
  return text;
}

// The directory could not be read, or some files not deleted: said, and the exit status 1.
int reportError(llvm::Error error) {
  llvm::errs() << "devdl-cache: " << llvm::toString(std::move(error)) << "\n";
  return 1;
}

}  // namespace

int main(int argc, char **argv) {
  llvm::cl::HideUnrelatedOptions(category);
  llvm::cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "devdl-cache (" << devdl::devdlBuild() << ")\n" << devdl::backend::spirTranslationStatement() << "\n";
  });
  llvm::cl::ParseCommandLineOptions(argc, argv, "devdl-cache: the disk cache of linked device programs\n");
  llvm::Expected<std::string> dir = directory.empty() ? DiskCache::directoryFromEnvironment() : directory.getValue();
  if (!dir) {
    llvm::errs() << "devdl-cache: no cache directory: " << llvm::toString(dir.takeError()) << "\n";
    return 1;
  }
  DiskCache cache(*dir, DiskCache::maxSizeFromEnvironment());
  if (command == "clear") {
    llvm::Expected<size_t> deleted = cache.clear();
    if (!deleted) return reportError(deleted.takeError());
    llvm::outs() << *dir << ": deleted " << *deleted << " files\n";
    return 0;
  }
  if (command != "list" && command != "verify") {
    llvm::errs() << "devdl-cache: unknown command `" << command << "` (list, verify or clear)\n";
    return 2;
  }
  llvm::Expected<std::vector<EntryFile>> listed = cache.list();
  if (!listed) return reportError(listed.takeError());
  const std::vector<EntryFile> &entries = *listed;
  uint64_t total = 0;
  size_t bad = 0;
  for (const EntryFile &entry : entries) {
    total += entry.size;
    bad += !entry.problem.empty();
  }
  if (command == "list") {
    llvm::outs() << *dir << ": " << entries.size() << " entries, " << devdl::store::bytesText(total) << " (bound "
                 << devdl::store::bytesText(DiskCache::maxSizeFromEnvironment()) << ")\n";
    for (const EntryFile &entry : entries) {
      const std::string name = entry.path.substr(entry.path.rfind('/') + 1, 32);
      llvm::outs() << name << "  " << devdl::store::bytesText(entry.size) << "  " << timeText(entry.lastUsed) << "  "
                   << (entry.problem.empty() ? "ok  " + contents(entry.description) : "BAD  " + entry.problem) << "\n";
    }
    return 0;
  }
  for (const EntryFile &entry : entries)
    if (!entry.problem.empty()) llvm::outs() << entry.path << ": " << entry.problem << "\n";
  llvm::outs() << *dir << ": " << entries.size() << " entries, " << bad << " bad\n";
  return bad ? 1 : 0;
}
