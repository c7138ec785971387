#include "support/debug.h"
#include "support/environment.h"

#include <llvm/ADT/StringRef.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

namespace devdl {

namespace {

constexpr const char *kHelp =
    "Valid options for the DEVDL_DEBUG environment variable are:\n"
    "  files       each place a file is looked for\n"
    "  libs        images as they are found, loaded and unloaded\n"
    "  symbols     duplicate definitions in the global scope\n"
    "  bindings    each import and the definition it binds to\n"
    "  statistics  link plans and build times, the disk cache's hits, misses and totals\n"
    "  all         all of the above\n"
    "  help        this list\n"
    "DEVDL_DEBUG_OUTPUT=FILE writes to FILE.PID instead of stderr.\n";

}  // namespace

Debug &Debug::get() {
  static Debug debug;
  return debug;
}

Debug::Debug() {
  const char *value = devdlVariable("DEVDL_DEBUG");
  if (!value) return;
  for (llvm::StringRef rest = value; !rest.empty();) {
    auto [item, tail] = rest.split(',');
    rest = tail;
    if (item == "libs") categories_ |= Libs;
    else if (item == "files") categories_ |= Files;
    else if (item == "symbols") categories_ |= Symbols;
    else if (item == "bindings") categories_ |= Bindings;
    else if (item == "statistics") categories_ |= Statistics;
    else if (item == "all") categories_ |= Libs | Symbols | Bindings | Statistics | Files;
    else if (item == "help") std::fputs(kHelp, stderr);
    else if (!item.empty()) std::fprintf(stderr, "devdl: DEVDL_DEBUG: unknown option `%s` (try help)\n", item.str().c_str());
  }
  // As LD_DEBUG_OUTPUT: suffixed with the process id, and a symbolic link in its place is not
  // followed (it could point the output at a file of the user's choosing).
  const char *output = devdlVariable("DEVDL_DEBUG_OUTPUT");
  if (categories_ && output && *output) {
    const std::string path = std::string(output) + "." + std::to_string(getpid());
    const int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (std::FILE *f = fd >= 0 ? fdopen(fd, "a") : nullptr) out_ = f;
    else if (fd >= 0) close(fd);
  }
}

void Debug::print(const std::string &text) {
  std::fprintf(out_, "devdl: %s\n", text.c_str());
  std::fflush(out_);
}

}  // namespace devdl
