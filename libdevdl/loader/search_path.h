// Where device_dlopen finds a file, and the lists of files the environment names, as the host
// loader reads LD_LIBRARY_PATH and LD_PRELOAD.
#pragma once

#include <string>
#include <vector>

namespace devdl {

/// The file a name stands for: a name with a slash is taken as it is; one without is looked for
/// in DEVDL_LIBRARY_PATH's directories, then taken as it is. Like LD_LIBRARY_PATH, the variable
/// is ignored in secure-execution (setuid) processes.
std::string findFile(const char *path);

/// The items of a list separated by spaces or colons, as LD_PRELOAD's.
std::vector<std::string> preloadList(const char *list);

}  // namespace devdl
