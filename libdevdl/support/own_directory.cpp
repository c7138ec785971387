#include "support/own_directory.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

namespace devdl {

std::string ownDirectory() {
  Dl_info info{};
  link_map *map = nullptr;
  if (!dladdr1(reinterpret_cast<const void *>(&ownDirectory), &info, reinterpret_cast<void **>(&map),
               RTLD_DL_LINKMAP) ||
      !info.dli_fname)
    return ".";
  std::string file = info.dli_fname;
  char path[PATH_MAX];
  if (map && map->l_name && !*map->l_name) {
    // Linked into the executable, which glibc names by argv[0], maybe relative to a directory the
    // process has left: the kernel's link is its path.
    if (ssize_t size = readlink("/proc/self/exe", path, sizeof path - 1); size > 0) file.assign(path, size_t(size));
  } else if (!file.empty() && file.front() != '/' && realpath(file.c_str(), path)) {
    file = path;  // a library opened by a relative path: as the directory is now
  }
  const size_t slash = file.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : file.substr(0, slash);
}

}  // namespace devdl
