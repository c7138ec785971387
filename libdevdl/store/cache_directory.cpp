// The directory the disk cache uses: made where missing, checked once, then held open, so that
// every entry is opened, written and renamed in the directory that was checked; and the checks
// that the directory and its entry files are this user's alone.
#include "store/cache_directory.h"

#include "store/cache_files.h"
#include "store/disk_cache.h"

#include <cerrno>

namespace devdl::store {

std::string untrustedEntry(const struct stat &st, uid_t user) {
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (st.st_uid != user) return "owned by user " + std::to_string(st.st_uid) + ", not by this user";
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return "writable by others";
  return "";
}

std::string untrustedDirectory(const struct stat &st, uid_t user) {
  if (st.st_uid != user) return "belongs to user " + std::to_string(st.st_uid) + ", not to this user";
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return "is writable by others";
  return "";
}

// A program that closes every descriptor (a daemon starting) may have put another file under
// the number: then it is no longer the cache's.
bool DiskCache::holdsDirectory() const {
  struct stat held;
  return directoryFd_ >= 0 && fstat(directoryFd_, &held) == 0 && held.st_dev == directoryDevice_ &&
         held.st_ino == directoryInode_;
}

bool DiskCache::prepare() {
  if (!enabled()) return false;
  // Everything goes through the directory opened here (openat, renameat): what is checked holds
  // for the directory used, even if its path is made to lead elsewhere later.
  if (holdsDirectory()) return true;
  directoryFd_ = -1;  // not closed: the number, if set, is another file's now
  if (std::string why = openDirectoryChecked(); !why.empty()) {
    report("none (" + why + ")");
    enabled_ = false;  // off for the rest of this object's life
    return false;
  }
  return true;
}

std::string DiskCache::openDirectoryChecked() {
  int fd = openDirectory(directory_);
  if (fd < 0 && errno == ENOENT) {
    // Missing components are made private to the user, as the XDG specification asks of its
    // directories; an existing one is the user's choice.
    for (size_t slash = directory_.find('/', 1);; slash = directory_.find('/', slash + 1)) {
      const std::string part = directory_.substr(0, slash);
      if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return "cannot create " + part + ": " + errnoText();
      if (slash == std::string::npos) break;
    }
    fd = openDirectory(directory_);
  }
  if (fd < 0) return directory_ + ": " + errnoText();
  struct stat st;
  std::string why;
  if (fstat(fd, &st) != 0) why = directory_ + ": " + errnoText();
  else if (std::string untrusted = untrustedDirectory(st, geteuid()); !untrusted.empty())
    why = directory_ + " " + untrusted;
  if (!why.empty()) {
    close(fd);
    return why;
  }
  directoryFd_ = fd;
  directoryDevice_ = st.st_dev;
  directoryInode_ = st.st_ino;
  user_ = st.st_uid;
  return "";
}

}  // namespace devdl::store
