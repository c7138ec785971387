// The files of a cache directory, for the parts of the disk cache: the names that say what each
// file is (entries, writers' temporary files, build locks, the tally), reading an entry's file,
// and the few operations on small files that entries, locks and the tally share. Only files
// named so are the cache's: another file in the directory is left alone.
#pragma once

#include "store/binary_store.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace devdl::store {

inline constexpr const char *kEntrySuffix = ".devdl-cache";
inline constexpr const char *kTemporaryPrefix = ".tmp-";
// A key's lock file: ".lock-<key>", held (flock) by the process that builds the key's program.
inline constexpr const char *kLockPrefix = ".lock-";
// The tally: the entries' total bytes as the last sweep found them plus what was stored since,
// and how many stores that was ("%20" PRIu64 " %10u\n", written over itself under its flock), so
// that a store reads one small file rather than the whole directory.
inline constexpr const char *kTallyName = ".size";

/// An entry's file: "<32 hex digits of the key, high half first>.devdl-cache".
std::string entryName(const Key &key);
/// The key an entry's file name says; nullopt for any other name.
std::optional<Key> keyFromName(std::string_view name);
/// A key's lock file, ".lock-<key>".
std::string lockName(const Key &key);
bool isLockName(std::string_view name);
/// A writer's temporary file: ".tmp-<key>-<pid>-<n>".
bool isTemporaryName(std::string_view name);

/// strerror(errno).
std::string errnoText();

/// A file descriptor, closed with this object.
struct Fd {
  int fd;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

bool writeAll(int fd, const char *data, size_t size);
/// Writes a small file's text (a lock's holder, the tally) over its last one, which was written
/// at the same width: never after cutting the file to nothing, as ext4 writes out a file cut to
/// nothing and written again when it is closed (auto_da_alloc), which made letting go of a build
/// lock cost 0.2-0.6 ms.
void writeOver(int fd, const char *text, int length);
/// Whether `name` in the directory `dirFd` still leads to the file open on `fd`.
bool stillNamed(int fd, int dirFd, const char *name);
/// Deletes the lock file `name` if no process holds it (one left by a killed builder): whether it
/// is gone.
bool removeUnheldLock(int dirFd, const char *name);

int openDirectory(const std::string &path);
struct CloseDirectory {
  void operator()(DIR *dir) const { closedir(dir); }
};
using Directory = std::unique_ptr<DIR, CloseDirectory>;

/// Reads and verifies the entry open on `fd`; `expected` is the key its name says, `user` this
/// user, whose file it must be (untrustedEntry). The reason when it is bad.
std::string readEntry(int fd, const struct stat &st, uid_t user, const Key &expected, Entry &out);

}  // namespace devdl::store
