// What the disk cache's tests share (disk_cache_test.cpp and the files beside it): keys made of
// text, the names and paths entries take, and what a directory holds.
#pragma once

#include "store/disk_cache.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

// A namespace of its own: the cache's files (store/cache_files.h) have an entryName too.
namespace devdl::store::fixture {

inline constexpr uint64_t kUnbounded = uint64_t(1) << 40;

inline Key keyOf(std::string_view what) { return KeyBuilder().add(what).finish(); }

inline std::string entryName(const Key &key) { return key.hex() + ".devdl-cache"; }
inline std::string entryPath(const std::string &dir, const Key &key) { return dir + "/" + entryName(key); }

inline bool exists(const std::string &path) { return access(path.c_str(), F_OK) == 0; }

// Files in `dir` whose names start with `prefix` (hidden ones too: temporary files are).
inline std::vector<std::string> filesIn(const std::string &dir, std::string_view prefix = "") {
  std::vector<std::string> names;
  if (DIR *d = opendir(dir.c_str())) {
    while (const dirent *e = readdir(d))
      if (const std::string_view name = e->d_name; name.starts_with(prefix) && name != "." && name != "..")
        names.push_back(e->d_name);
    closedir(d);
  }
  return names;
}

}  // namespace devdl::store::fixture
