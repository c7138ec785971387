// The directory the disk cache uses: made where missing, checked once, then held open, so that
// every entry is opened, written and renamed in the directory that was checked; the checks that
// the directory and its entry files are this user's alone; and entry files put in it whole.
#include "store/cache_directory.h"

#include "store/cache_files.h"

#include "support/debug.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>

namespace devdl::store {

namespace {

// Names of temporary files tried before a store gives up (each taken one was left by a killed
// writer that had this process ID).
constexpr int kTemporaryNameAttempts = 16;

}  // namespace

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

void reportCache(const std::string &text) {
  if (Debug::get().on(Debug::Statistics)) Debug::get().print("cache: " + text);
}

CacheDirectory::CacheDirectory(std::string path, uint64_t maxSize, unsigned sweepEvery)
    : usable_(!path.empty()), path_(std::move(path)), maxSize_(maxSize), sweepEvery_(std::max(sweepEvery, 1u)) {}

CacheDirectory::~CacheDirectory() {
  if (held()) close(fd_);
}

std::string CacheDirectory::pathOf(const std::string &name) const { return path_ + "/" + name; }

// A program that closes every descriptor (a daemon starting) may have put another file under
// the number: then it is no longer the cache's.
bool CacheDirectory::held() const {
  struct stat held;
  return fd_ >= 0 && fstat(fd_, &held) == 0 && held.st_dev == device_ && held.st_ino == inode_;
}

bool CacheDirectory::prepare() {
  if (!usable()) return false;
  // Everything goes through the directory opened here (openat, renameat): what is checked holds
  // for the directory used, even if its path is made to lead elsewhere later.
  if (held()) return true;
  fd_ = -1;  // not closed: the number, if set, is another file's now
  if (std::string why = openChecked(); !why.empty()) {
    reportCache("none (" + why + ")");
    usable_ = false;  // off for the rest of this object's life
    return false;
  }
  return true;
}

std::string CacheDirectory::openChecked() {
  int fd = openDirectory(path_);
  if (fd < 0 && errno == ENOENT) {
    // Missing components are made private to the user, as the XDG specification asks of its
    // directories; an existing one is the user's choice.
    for (size_t slash = path_.find('/', 1);; slash = path_.find('/', slash + 1)) {
      const std::string part = path_.substr(0, slash);
      if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return "cannot create " + part + ": " + errnoText();
      if (slash == std::string::npos) break;
    }
    fd = openDirectory(path_);
  }
  if (fd < 0) return path_ + ": " + errnoText();
  struct stat st;
  std::string why;
  if (fstat(fd, &st) != 0) why = path_ + ": " + errnoText();
  else if (std::string untrusted = untrustedDirectory(st, geteuid()); !untrusted.empty())
    why = path_ + " " + untrusted;
  if (!why.empty()) {
    close(fd);
    return why;
  }
  fd_ = fd;
  device_ = st.st_dev;
  inode_ = st.st_ino;
  user_ = st.st_uid;
  return "";
}

std::string CacheDirectory::putEntry(const Key &key, std::initializer_list<std::string_view> parts, bool sync) {
  // Written whole under a name no reader looks for, synced (where asked), then renamed into
  // place: readers see the old entry, or none, or the new one, never a part; a writer killed on
  // the way leaves only a temporary file, which a sweep removes later. A name that exists
  // already was left by a killed writer that had this process ID (before a reboot, or in another
  // PID namespace sharing the directory), or is being written by another cache object of this
  // process: the next is taken.
  const std::string name = entryName(key);
  std::string temporary, failure;
  bool created = false, lostThisOne = false;
  {
    Fd file(-1);
    for (int attempt = 0; file.fd < 0 && attempt < kTemporaryNameAttempts; ++attempt) {
      temporary = kTemporaryPrefix + key.hex() + "-" + std::to_string(getpid()) + "-" + std::to_string(temporaries_++);
      file.fd = openat(fd_, temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
      if (file.fd < 0 && errno != EEXIST) break;
    }
    created = file.fd >= 0;
    if (!created) failure = "cannot create " + pathOf(temporary) + ": " + errnoText();
    for (std::string_view part : parts)
      if (failure.empty() && !writeAll(file.fd, part.data(), part.size()))
        failure = "cannot write " + pathOf(temporary) + ": " + errnoText();
    if (failure.empty() && sync && fsync(file.fd) != 0)
      failure = "cannot sync " + pathOf(temporary) + ": " + errnoText();
  }
  if (failure.empty() && renameat(fd_, temporary.c_str(), fd_, name.c_str()) != 0) {
    // ENOENT: the temporary file was deleted meanwhile (devdl-cache clear); only this entry is lost.
    lostThisOne = errno == ENOENT;
    failure = "cannot rename " + pathOf(temporary) + " to " + pathOf(name) + ": " + errnoText();
  }
  if (!failure.empty()) {
    if (created) unlinkat(fd_, temporary.c_str(), 0);
    if (!lostThisOne) writable_ = false;
    return failure;
  }
  // The rename itself survives a crash once the directory is synced.
  if (sync) fsync(fd_);
  return "";
}

}  // namespace devdl::store
