// Where device_dlopen finds a file and how it reads it, and the lists of files the environment
// names, as the host loader reads LD_LIBRARY_PATH and LD_PRELOAD.
#pragma once

#include "support/regular_file.h"

#include <llvm/Support/Error.h>

#include <string>
#include <vector>

namespace devdl {

/// The file a name stands for, opened: a name with a slash is taken as it is; one without is
/// looked for in DEVDL_LIBRARY_PATH's directories, then in the current directory. In a
/// secure-execution (setuid) process neither: the variable is ignored, as LD_LIBRARY_PATH is, and a
/// bare name is never taken from the current directory, which the invoking user chose.
llvm::Expected<RegularFile> openNamedFile(const char *name);

/// The items of a list separated by spaces or colons, as LD_PRELOAD's.
std::vector<std::string> preloadList(const char *list);

}  // namespace devdl
