// The files of a cache directory: their names, reading an entry's file, and operations on small
// files that the parts of the disk cache share.
#include "store/cache_files.h"

#include "store/cache_directory.h"

#include <fcntl.h>
#include <sys/file.h>

#include <cerrno>
#include <cstring>

namespace devdl::store {

namespace {

std::optional<Key> keyFromHex(std::string_view name) {
  if (name.size() < 32) return std::nullopt;
  Key key;
  for (int half = 0; half < 2; ++half) {
    uint64_t value = 0;
    for (char c : name.substr(half * 16, 16)) {
      const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (digit < 0) return std::nullopt;
      value = value << 4 | static_cast<uint64_t>(digit);
    }
    (half == 0 ? key.high : key.low) = value;
  }
  return key;
}

}  // namespace

std::string entryName(const Key &key) { return key.hex() + kEntrySuffix; }

std::optional<Key> keyFromName(std::string_view name) {
  if (name.size() != 32 + std::strlen(kEntrySuffix) || name.substr(32) != kEntrySuffix) return std::nullopt;
  return keyFromHex(name);
}

std::string lockName(const Key &key) { return kLockPrefix + key.hex(); }

bool isLockName(std::string_view name) {
  return name.starts_with(kLockPrefix) && name.size() == std::strlen(kLockPrefix) + 32 &&
         keyFromHex(name.substr(std::strlen(kLockPrefix)));
}

// Nothing else in the directory is touched.
bool isTemporaryName(std::string_view name) {
  if (!name.starts_with(kTemporaryPrefix)) return false;
  name.remove_prefix(std::strlen(kTemporaryPrefix));
  return keyFromHex(name) && name.size() > 33 && name[32] == '-';
}

std::string errnoText() { return std::strerror(errno); }

bool writeAll(int fd, const char *data, size_t size) {
  for (size_t done = 0; done < size;) {
    const ssize_t n = write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = ENOSPC;  // no progress, and no errno of its own to report
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

void writeOver(int fd, const char *text, int length) {
  [[maybe_unused]] const ssize_t written = pwrite(fd, text, static_cast<size_t>(length), 0);
}

bool stillNamed(int fd, int dirFd, const char *name) {
  struct stat open, named;
  return fstat(fd, &open) == 0 && fstatat(dirFd, name, &named, AT_SYMLINK_NOFOLLOW) == 0 &&
         open.st_dev == named.st_dev && open.st_ino == named.st_ino;
}

// Taken first, so that a process that opened it meanwhile and locks it after the delete sees its
// name gone and takes a new one.
bool removeUnheldLock(int dirFd, const char *name) {
  Fd file(openat(dirFd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (file.fd < 0) return errno == ENOENT;
  if (flock(file.fd, LOCK_EX | LOCK_NB) != 0 || !stillNamed(file.fd, dirFd, name)) return false;
  return unlinkat(dirFd, name, 0) == 0 || errno == ENOENT;
}

int openDirectory(const std::string &path) { return open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); }

std::string readEntry(int fd, const struct stat &st, uid_t user, const Key &expected, Entry &out) {
  if (std::string why = untrustedEntry(st, user); !why.empty()) return why;
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < Entry::kHeaderSize) return "truncated (" + std::to_string(size) + " bytes)";
  // The whole file in one read, as LLVM reads files: mapped from 16 KB on (no copy, no page of
  // fresh memory to fault in for each 4 KB), else read. Entries are never written in place (a
  // store renames a new file over the old one), so a mapping does not change under the checks.
  auto buffer = llvm::MemoryBuffer::getOpenFile(fd, "", size, /*RequiresNullTerminator=*/false);
  if (!buffer) return "unreadable: " + buffer.getError().message();
  return verifyEntry(std::move(*buffer), expected, out);
}

}  // namespace devdl::store
