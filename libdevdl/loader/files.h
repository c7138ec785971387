// Where device_dlopen finds a file and how it reads it, and the lists of files the environment
// names, as the host loader reads LD_LIBRARY_PATH and LD_PRELOAD and searches its directories.
#pragma once

#include "support/regular_file.h"

#include <llvm/Support/Error.h>

#include <string>
#include <vector>

namespace devdl {

/// Where installed device libraries are: `devdl` in the directory of the library that holds
/// devdl (<libdir>/devdl), as ld.so has its own directories.
std::string defaultLibraryDirectory();

/// The file a name stands for, opened: a name with a slash is taken as it is; one without is
/// looked for as ld.so looks for a library: in DEVDL_LIBRARY_PATH's directories, then in the
/// default directory, and never in the current directory. In a secure-execution (setuid) process
/// the variable is ignored, as LD_LIBRARY_PATH is. DEVDL_DEBUG=files says each place tried, as
/// LD_DEBUG=libs does; a name found nowhere is NotFound, naming the places.
llvm::Expected<RegularFile> openNamedFile(const char *name);

/// The items of a list separated by spaces or colons, as LD_PRELOAD's.
std::vector<std::string> preloadList(const char *list);

}  // namespace devdl
