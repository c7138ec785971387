// The cache as devdl-cache sees it: every entry file, checked as a load checks it, and clearing
// the directory of the cache's files (entries, leftover temporary files, lock files no process
// holds, the tally).
#include "store/cache_files.h"
#include "store/disk_cache.h"

#include "support/error.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace devdl::store {

namespace {

/// The directory opened for reading its names; none (and no error) where it does not exist,
/// which is an empty cache.
llvm::Expected<Directory> openListing(const std::string &path) {
  if (path.empty()) return Directory();
  const int fd = openDirectory(path);
  if (fd < 0 && errno == ENOENT) return Directory();
  Directory dir(fd < 0 ? nullptr : fdopendir(fd));
  if (!dir) {
    const int error = errno;
    if (fd >= 0) close(fd);
    return fail(ErrorCode::Io, path + ": " + std::strerror(error));
  }
  return dir;
}

}  // namespace

llvm::Expected<std::vector<EntryFile>> DiskCache::list() const {
  auto dir = openListing(directory_.path());
  if (!dir) return dir.takeError();
  std::vector<EntryFile> files;
  if (!*dir) return files;
  const uid_t user = geteuid();
  while (const dirent *d = readdir(dir->get())) {
    const std::optional<Key> key = keyFromName(d->d_name);
    if (!key) continue;
    EntryFile file;
    file.key = *key;
    file.path = directory_.pathOf(d->d_name);
    Fd fd(openat(dirfd(dir->get()), d->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
    struct stat st;
    if (fd.fd < 0 || fstat(fd.fd, &st) != 0) {
      file.problem = "unreadable: " + errnoText();
    } else {
      file.size = static_cast<uint64_t>(st.st_size);
      file.lastUsed = st.st_mtime;
      Entry entry;
      file.problem = readEntry(fd.fd, st, user, *key, entry);
      if (file.problem.empty()) file.description = entry.description();
    }
    files.push_back(std::move(file));
  }
  std::sort(files.begin(), files.end(), [](const EntryFile &a, const EntryFile &b) { return a.path < b.path; });
  return files;
}

llvm::Expected<size_t> DiskCache::clear() const {
  auto dir = openListing(directory_.path());
  if (!dir) return dir.takeError();
  if (!*dir) return 0;
  size_t deleted = 0, kept = 0;
  std::string firstKept;
  while (const dirent *d = readdir(dir->get())) {
    const std::string_view name = d->d_name;
    if (isLockName(name)) {
      if (removeUnheldLock(dirfd(dir->get()), d->d_name)) ++deleted;
      continue;  // one held is a build under way: its holder deletes it
    }
    if (!keyFromName(name) && !isTemporaryName(name)) continue;
    if (unlinkat(dirfd(dir->get()), d->d_name, 0) == 0 || errno == ENOENT) {
      ++deleted;
    } else if (kept++ == 0) {
      firstKept = directory_.pathOf(d->d_name) + ": " + errnoText();
    }
  }
  // The tally goes with them (not counted: bookkeeping); the next store counts what is left.
  unlinkat(dirfd(dir->get()), kTallyName, 0);
  if (kept)
    return fail(ErrorCode::Io, "deleted " + std::to_string(deleted) + " files, but not " + std::to_string(kept) +
                                   " (" + firstKept + (kept > 1 ? ", and more" : "") + ")");
  return deleted;
}

}  // namespace devdl::store
