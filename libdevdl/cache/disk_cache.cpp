#include "cache/disk_cache.h"

#include "support/debug.h"
#include "support/environment.h"
#include "support/error.h"

#include <llvm/Support/FormatVariadic.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cctype>
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace devdl::cache {

namespace {

constexpr size_t kHeaderSize = Entry::kHeaderSize;
constexpr const char *kSuffix = ".devdl-cache";
constexpr const char *kTemporaryPrefix = ".tmp-";
// A temporary file this old belongs to a writer that was killed.
constexpr int64_t kStaleTemporarySeconds = 600;
constexpr int64_t kLastUseResolutionSeconds = 60;
// Names of temporary files tried before a store gives up (each taken one was left by a killed
// writer that had this process ID).
constexpr int kTemporaryNameAttempts = 16;
// A key's lock file: ".lock-<key>", held (flock) by the process that builds the key's program.
constexpr const char *kLockPrefix = ".lock-";
// The tally: the entries' total bytes as the last sweep found them plus what was stored since,
// and how many stores that was ("%20" PRIu64 " %10u\n", written over itself under its flock), so
// that a store reads one small file rather than the whole directory.
constexpr const char *kTallyName = ".size";
constexpr int kTallyLooks = 50;  // a millisecond apart
// A waiter looks again after this, doubling up to the longest: builds take milliseconds to
// seconds, and a look is a system call.
constexpr std::chrono::milliseconds kFirstLook{1}, kLongestLook{20};

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

std::string errnoText() { return std::strerror(errno); }

struct Fd {
  int fd;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

/// Why an opened entry file cannot be trusted ("" when it can): it must be a plain file of
/// `user` (this user) that nobody else can write.
std::string untrusted(const struct stat &st, uid_t user) {
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (st.st_uid != user) return "owned by user " + std::to_string(st.st_uid) + ", not by this user";
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return "writable by others";
  return "";
}

/// Reads and verifies the entry open on `fd`; `expected` is the key its name says. The reason
/// when it is bad.
std::string readEntry(int fd, const struct stat &st, uid_t user, const Key &expected, Entry &out) {
  if (std::string why = untrusted(st, user); !why.empty()) return why;
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < kHeaderSize) return "truncated (" + std::to_string(size) + " bytes)";
  // The whole file in one read, as LLVM reads files: mapped from 16 KB on (no copy, no page of
  // fresh memory to fault in for each 4 KB), else read. Entries are never written in place (a
  // store renames a new file over the old one), so a mapping does not change under the checks.
  auto buffer = llvm::MemoryBuffer::getOpenFile(fd, "", size, /*RequiresNullTerminator=*/false);
  if (!buffer) return "unreadable: " + buffer.getError().message();
  return verifyEntry(std::move(*buffer), expected, out);
}

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

std::optional<Key> keyFromName(std::string_view name) {
  if (name.size() != 32 + std::strlen(kSuffix) || name.substr(32) != kSuffix) return std::nullopt;
  return keyFromHex(name);
}

std::string entryName(const Key &key) { return key.hex() + kSuffix; }

int openDirectory(const std::string &path) { return open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); }

struct CloseDirectory {
  void operator()(DIR *dir) const { closedir(dir); }
};
using Directory = std::unique_ptr<DIR, CloseDirectory>;

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

bool isLockName(std::string_view name) {
  return name.starts_with(kLockPrefix) && name.size() == std::strlen(kLockPrefix) + 32 &&
         keyFromHex(name.substr(std::strlen(kLockPrefix)));
}

/// Writes a small file's text (a lock's holder, the tally) over its last one, which was written
/// at the same width: never after cutting the file to nothing, as ext4 writes out a file cut to
/// nothing and written again when it is closed (auto_da_alloc), which made letting go of a build
/// lock cost 0.2-0.6 ms.
void writeOver(int fd, const char *text, int length) {
  [[maybe_unused]] const ssize_t written = pwrite(fd, text, static_cast<size_t>(length), 0);
}

/// Whether `name` in the directory `dirFd` still leads to the file open on `fd`.
bool stillNamed(int fd, int dirFd, const char *name) {
  struct stat open, named;
  return fstat(fd, &open) == 0 && fstatat(dirFd, name, &named, AT_SYMLINK_NOFOLLOW) == 0 &&
         open.st_dev == named.st_dev && open.st_ino == named.st_ino;
}

/// Deletes the lock file `name` if no process holds it (one left by a killed builder): whether it
/// is gone. Taken first, so that a process that opened it meanwhile and locks it after the
/// delete sees its name gone and takes a new one.
bool removeUnheldLock(int dirFd, const char *name) {
  Fd file(openat(dirFd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (file.fd < 0) return errno == ENOENT;
  if (flock(file.fd, LOCK_EX | LOCK_NB) != 0 || !stillNamed(file.fd, dirFd, name)) return false;
  return unlinkat(dirFd, name, 0) == 0 || errno == ENOENT;
}

// A writer's temporary file: ".tmp-<key>-<pid>-<n>". Nothing else in the directory is touched.
bool isTemporaryName(std::string_view name) {
  if (!name.starts_with(kTemporaryPrefix)) return false;
  name.remove_prefix(std::strlen(kTemporaryPrefix));
  return keyFromHex(name) && name.size() > 33 && name[32] == '-';
}

}  // namespace

std::string bytesText(uint64_t bytes) {
  char text[32];
  if (bytes < 10 * 1024) std::snprintf(text, sizeof text, "%" PRIu64 " B", bytes);
  else if (bytes < 10 * 1024 * 1024) std::snprintf(text, sizeof text, "%" PRIu64 " KiB", bytes / 1024);
  else if (bytes < uint64_t(10) << 30) std::snprintf(text, sizeof text, "%" PRIu64 " MiB", bytes >> 20);
  else std::snprintf(text, sizeof text, "%" PRIu64 " GiB", bytes >> 30);
  return text;
}

std::string DiskCache::directoryFromEnvironment(std::string *why) {
  auto none = [&](const char *reason) {
    if (why) *why = reason;
    return std::string();
  };
  if (secureExecution()) return none("off in a secure-execution process");
  if (const char *off = devdlVariable("DEVDL_CACHE"); off && std::string_view(off) == "0") return none("DEVDL_CACHE=0");
  if (const char *dir = devdlVariable("DEVDL_CACHE_DIR"); dir && *dir) return dir;
  // The XDG base directory specification ignores a relative XDG_CACHE_HOME.
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg == '/') return std::string(xdg) + "/devdl";
  if (const char *home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/devdl";
  return none("no DEVDL_CACHE_DIR, XDG_CACHE_HOME or HOME");
}

uint64_t DiskCache::maxSizeFromEnvironment() {
  constexpr uint64_t kDefault = uint64_t(1) << 30;
  const char *value = devdlVariable("DEVDL_CACHE_MAX_SIZE");
  if (!value || !*value) return kDefault;
  char *end = nullptr;
  errno = 0;
  uint64_t size = std::strtoull(value, &end, 10);
  const int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
  if (shift) ++end;
  if (errno || !std::isdigit(static_cast<unsigned char>(value[0])) || *end || size > (UINT64_MAX >> shift)) {
    if (Debug::get().on(Debug::Statistics))
      Debug::get().print("cache: DEVDL_CACHE_MAX_SIZE=" + std::string(value) + " is no size (bytes, or with K, M or G); 1G it is");
    return kDefault;
  }
  return size << shift;
}

std::chrono::milliseconds DiskCache::buildWaitFromEnvironment() {
  const char *value = devdlVariable("DEVDL_CACHE_WAIT");
  if (!value || !*value) return kDefaultBuildWait;
  char *end = nullptr;
  errno = 0;
  const double seconds = std::strtod(value, &end);
  // At most a day: anything longer is a mistake, and the milliseconds must not overflow.
  if (errno || end == value || *end || !(seconds >= 0 && seconds <= 86400)) {
    if (Debug::get().on(Debug::Statistics))
      Debug::get().print("cache: DEVDL_CACHE_WAIT=" + std::string(value) +
                         " is no number of seconds (0 to 86400); waiting while the builder lives");
    return kDefaultBuildWait;
  }
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

DiskCache &DiskCache::process() {
  static DiskCache cache = [] {
    Debug::get();  // made first, so that it outlives the cache's report at exit
    std::string why;
    std::string dir = directoryFromEnvironment(&why);
    if (dir.empty() && Debug::get().on(Debug::Statistics)) Debug::get().print("cache: none (" + why + ")");
    return DiskCache(std::move(dir), maxSizeFromEnvironment(), buildWaitFromEnvironment());
  }();
  return cache;
}

DiskCache::DiskCache(std::string directory, uint64_t maxSize, std::chrono::milliseconds buildWait, unsigned sweepEvery)
    : enabled_(!directory.empty()),
      directory_(std::move(directory)),
      maxSize_(maxSize),
      buildWait_(buildWait),
      sweepEvery_(std::max(sweepEvery, 1u)) {}

DiskCache::~DiskCache() {
  if (holdsDirectory()) close(directoryFd_);
  if (!Debug::get().on(Debug::Statistics)) return;
  const Statistics &summaries = summaryStats_;
  if (summaries.hits + summaries.misses != 0)
    report("image summaries: " + std::to_string(summaries.hits) + " used, " + std::to_string(summaries.misses) +
           " missing, " + std::to_string(summaries.stores) + " stored, " + std::to_string(summaries.rejected) +
           " bad deleted; read " + bytesText(summaries.bytesRead) + ", wrote " + bytesText(summaries.bytesWritten));
  if (stats_.hits + stats_.misses == 0) return;
  char saved[32], waited[32];
  std::snprintf(saved, sizeof saved, "%.1f ms", static_cast<double>(stats_.nanosecondsSaved) / 1e6);
  std::snprintf(waited, sizeof waited, "%.1f ms", static_cast<double>(stats_.waitNanoseconds) / 1e6);
  report(std::to_string(stats_.hits) + " hits, " + std::to_string(stats_.misses) + " misses, " +
         std::to_string(stats_.stores) + " stored, " + std::to_string(stats_.rejected) + " bad entries deleted, " +
         std::to_string(stats_.evicted) + " evicted; read " + bytesText(stats_.bytesRead) + ", wrote " +
         bytesText(stats_.bytesWritten) + "; build time saved " + saved + "; waited for other processes' builds " +
         std::to_string(stats_.waits) + " times, " + waited);
}

void DiskCache::report(const std::string &text) const {
  if (Debug::get().on(Debug::Statistics)) Debug::get().print("cache: " + text);
}

std::string DiskCache::pathOf(const std::string &name) const { return directory_ + "/" + name; }

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
  else if (st.st_uid != geteuid()) why = directory_ + " belongs to user " + std::to_string(st.st_uid) + ", not to this user";
  else if (st.st_mode & (S_IWGRP | S_IWOTH)) why = directory_ + " is writable by others";
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

std::optional<Entry> DiskCache::load(const Key &key) {
  std::lock_guard lock(mutex_);
  return read(key, stats_, "the program is built again");
}

std::optional<Entry> DiskCache::loadSummary(const Key &key) {
  std::lock_guard lock(mutex_);
  return read(key, summaryStats_, "the image file is read");
}

std::optional<Entry> DiskCache::read(const Key &key, Statistics &counts, std::string_view instead) {
  if (!prepare()) return std::nullopt;
  const std::string name = entryName(key);
  // O_NONBLOCK: a FIFO put in an entry's place must not hang the load before fstat shows it is
  // no regular file (regular files ignore the flag).
  Fd file(openat(directoryFd_, name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  struct stat st;
  if (file.fd < 0 || fstat(file.fd, &st) != 0) {
    if (errno != ENOENT) report("cannot read " + pathOf(name) + ": " + errnoText());
    ++counts.misses;
    return std::nullopt;
  }
  Entry entry;
  if (std::string why = readEntry(file.fd, st, user_, key, entry); !why.empty()) {
    ++counts.misses;
    if (untrusted(st, user_).empty()) {
      // Delete it only if it is still the file read: another process may have put a good
      // entry in its place meanwhile.
      struct stat now;
      if (fstatat(directoryFd_, name.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_ino == st.st_ino &&
          now.st_dev == st.st_dev)
        unlinkat(directoryFd_, name.c_str(), 0);
      ++counts.rejected;
      report(pathOf(name) + ": " + why + "; deleted, " + std::string(instead));
    } else {
      report(pathOf(name) + ": not trusted, " + why + "; " + std::string(instead));
    }
    return std::nullopt;
  }
  // The file's time is its last use, for eviction (access times are often not kept); to the
  // minute is close enough, and spares most hits a write.
  if (time(nullptr) - st.st_mtime >= kLastUseResolutionSeconds) {
    const struct timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
    futimens(file.fd, times);
  }
  ++counts.hits;
  counts.bytesRead += static_cast<uint64_t>(st.st_size);
  return entry;
}

// A key's lock file, held open and locked while this process builds the key's program. Let go
// after the entry is stored: its name is deleted first, so that a waiter that locks the old file
// then sees it unnamed and takes the name anew (and finds the entry).
class DiskCache::FileLock final : public BuildLock {
 public:
  FileLock(DiskCache &cache, const Key &key, int fd) : cache_(cache), key_(key), fd_(fd) {}
  ~FileLock() override {
    std::lock_guard lock(cache_.mutex_);
    std::erase(cache_.lockedHere_, key_);
    const std::string name = kLockPrefix + key_.hex();
    if (cache_.holdsDirectory() && stillNamed(fd_, cache_.directoryFd_, name.c_str()))
      unlinkat(cache_.directoryFd_, name.c_str(), 0);
    close(fd_);
  }

 private:
  DiskCache &cache_;
  Key key_;
  int fd_;
};

BuildTurn DiskCache::awaitTurn(const Key &key) {
  using Clock = std::chrono::steady_clock;
  const std::string name = kLockPrefix + key.hex();
  const auto start = Clock::now();
  auto look = kFirstLook;
  std::string holder;  // the process building, as its lock file says
  Fd file(-1);
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (!prepare() || std::find(lockedHere_.begin(), lockedHere_.end(), key) != lockedHere_.end()) return {};
      if (file.fd < 0) file.fd = openat(directoryFd_, name.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
      if (file.fd < 0) {
        report("cannot lock " + pathOf(name) + ": " + errnoText() + "; building without it");
        return {};
      }
      if (flock(file.fd, LOCK_EX | LOCK_NB) == 0) {
        // The last holder deletes the name before it lets go: locked, this file may be one no
        // other process will find any more.
        if (!stillNamed(file.fd, directoryFd_, name.c_str())) {
          close(std::exchange(file.fd, -1));
          continue;
        }
        // Who builds, for what waiters say; nothing else reads it.
        char pid[32];
        writeOver(file.fd, pid, std::snprintf(pid, sizeof pid, "%20ld\n", static_cast<long>(getpid())));
        lockedHere_.push_back(key);
        BuildTurn turn;
        turn.lock = std::make_unique<FileLock>(*this, key, std::exchange(file.fd, -1));
        // Another process may have stored the entry since the miss, having waited for it or
        // not. The miss was counted: this read counts what it came to instead.
        turn.entry = read(key, stats_, "the program is built again");
        --stats_.misses;
        if (!holder.empty()) {
          const uint64_t waited = static_cast<uint64_t>(std::chrono::nanoseconds(Clock::now() - start).count());
          ++stats_.waits;
          stats_.waitNanoseconds += waited;
          report(llvm::formatv("waited {0:f1} ms for {1}'s build of {2}: ", waited / 1e6, holder, key.hex()).str() +
                 (turn.entry ? "its entry is loaded" : "it stored none, so it is built here"));
        }
        return turn;
      }
      if (errno != EWOULDBLOCK) {
        report("cannot lock " + pathOf(name) + ": " + errnoText() + "; building without it");
        return {};
      }
      if (holder.empty()) {
        char text[24] = {};
        const ssize_t n = pread(file.fd, text, sizeof text - 1, 0);
        const long pid = n > 0 ? std::strtol(text, nullptr, 10) : 0;
        holder = pid > 0 ? "process " + std::to_string(pid) : "another process";
        report(holder + " builds " + key.hex() + ": waiting for its entry");
      }
    }
    const auto waited = Clock::now() - start;
    // In milliseconds: the bound may be their largest number (no bound), nanoseconds' overflow.
    const auto left = buildWait_ - std::chrono::duration_cast<std::chrono::milliseconds>(waited);
    if (left <= std::chrono::milliseconds::zero()) {
      std::lock_guard lock(mutex_);
      ++stats_.waits;
      stats_.waitNanoseconds += static_cast<uint64_t>(std::chrono::nanoseconds(waited).count());
      report("waited " + std::to_string(buildWait_.count()) + " ms (DEVDL_CACHE_WAIT) for " + holder + "'s build of " +
             key.hex() + ": built here too");
      return {};
    }
    std::this_thread::sleep_for(left < look ? left + std::chrono::milliseconds(1) : look);
    look = std::min(look * 2, kLongestLook);
  }
}

void DiskCache::store(const Key &key, std::string_view description, std::string_view binary, uint64_t buildNanoseconds) {
  write(key, description, binary, buildNanoseconds, /*sync=*/true, stats_);
}

void DiskCache::storeCopy(const Key &key, const Entry &entry) {
  write(key, entry.description(), entry.binary(), entry.buildNanoseconds, /*sync=*/false, stats_);
}

void DiskCache::storeSummary(const Key &key, std::string_view description, std::string_view summary) {
  write(key, description, summary, 0, /*sync=*/false, summaryStats_);
}

void DiskCache::write(const Key &key, std::string_view description, std::string_view binary, uint64_t buildNanoseconds,
                      bool sync, Statistics &counts) {
  std::lock_guard lock(mutex_);
  if (!enabled() || !storing_) return;
  description = description.substr(0, Entry::kMaxDescription);
  const uint64_t size = kHeaderSize + description.size() + binary.size();
  if (size > maxSize_) {
    report("an entry of " + bytesText(size) + " is over the bound of " + bytesText(maxSize_) + ": not stored");
    return;
  }
  if (!prepare()) return;
  const std::string header = entryHeader(key, description, binary, buildNanoseconds);

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
      file.fd = openat(directoryFd_, temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
      if (file.fd < 0 && errno != EEXIST) break;
    }
    created = file.fd >= 0;
    if (!created) failure = "cannot create " + pathOf(temporary) + ": " + errnoText();
    else if (!writeAll(file.fd, header.data(), header.size()) ||
             !writeAll(file.fd, binary.data(), binary.size()) ||
             !writeAll(file.fd, description.data(), description.size()))
      failure = "cannot write " + pathOf(temporary) + ": " + errnoText();
    else if (sync && fsync(file.fd) != 0) failure = "cannot sync " + pathOf(temporary) + ": " + errnoText();
  }
  if (failure.empty() && renameat(directoryFd_, temporary.c_str(), directoryFd_, name.c_str()) != 0) {
    // ENOENT: the temporary file was deleted meanwhile (devdl-cache clear); only this entry is lost.
    lostThisOne = errno == ENOENT;
    failure = "cannot rename " + pathOf(temporary) + " to " + pathOf(name) + ": " + errnoText();
  }
  if (!failure.empty()) {
    if (created) unlinkat(directoryFd_, temporary.c_str(), 0);
    if (lostThisOne) {
      report(failure + "; not stored");
      return;
    }
    storing_ = false;
    report(failure + "; nothing more is stored by this process");
    return;
  }
  // The rename itself survives a crash once the directory is synced.
  if (sync) fsync(directoryFd_);
  ++counts.stores;
  counts.bytesWritten += size;
  tally(size);
}

void DiskCache::tally(uint64_t bytes) {
  // Under the tally's lock, so that processes storing at once count each other's entries and
  // sweep one at a time. A tally that cannot be kept means a sweep at each store, as without one;
  // one held for long (the sweep of a large directory, a stopped process) leaves this entry to
  // be counted by the next sweep rather than hold the store up.
  Fd file(openat(directoryFd_, kTallyName, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600));
  struct stat st;
  if (file.fd < 0 || fstat(file.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    sweep();
    return;
  }
  for (int look = 0; flock(file.fd, LOCK_EX | LOCK_NB) != 0; ++look) {
    if (errno != EWOULDBLOCK) {
      sweep();
      return;
    }
    if (look == kTallyLooks) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  char text[64] = {};
  uint64_t total = 0;
  unsigned stores = 0;
  // Empty (new) or unreadable: the directory says what the total is.
  const bool known = pread(file.fd, text, sizeof text - 1, 0) > 0 &&
                     std::sscanf(text, "%" SCNu64 " %u", &total, &stores) == 2;
  total += bytes;
  if (!known || total > maxSize_ || ++stores >= sweepEvery_) {
    const std::optional<uint64_t> swept = sweep();
    if (!swept) return;  // left as it was: the next store sweeps again where it must
    total = *swept;
    stores = 0;
  }
  char line[64];
  writeOver(file.fd, line, std::snprintf(line, sizeof line, "%20" PRIu64 " %10u\n", total, stores));
}

void DiskCache::discard(const Key &key, std::string_view why) {
  std::lock_guard lock(mutex_);
  if (!prepare()) return;
  const std::string name = entryName(key);
  unlinkat(directoryFd_, name.c_str(), 0);
  // load() counted it as a hit; the program is built after all.
  if (stats_.hits) --stats_.hits;
  ++stats_.misses;
  ++stats_.rejected;
  report(pathOf(name) + ": " + std::string(why) + "; deleted, the program is built again");
}

void DiskCache::unusable(const Key &key, std::string_view why) {
  std::lock_guard lock(mutex_);
  if (stats_.hits) --stats_.hits;  // as discard()
  ++stats_.misses;
  report(pathOf(entryName(key)) + ": " + std::string(why) + "; kept, the program is built here");
}

void DiskCache::saved(uint64_t buildNanoseconds, uint64_t loadNanoseconds) {
  std::lock_guard lock(mutex_);
  if (buildNanoseconds > loadNanoseconds) stats_.nanosecondsSaved += buildNanoseconds - loadNanoseconds;
}

std::optional<uint64_t> DiskCache::sweep() {
  // An open file description of its own: readdir moves its offset, which a dup would share.
  Directory dir(fdopendir(openat(directoryFd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)));
  if (!dir) return std::nullopt;
  struct File {
    std::string name;
    uint64_t size;
    struct timespec used;
  };
  std::vector<File> entries;
  uint64_t total = 0;
  const int64_t now = time(nullptr);
  while (const dirent *d = readdir(dir.get())) {
    const std::string_view name = d->d_name;
    struct stat st;
    if (fstatat(directoryFd_, d->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    if (isTemporaryName(name)) {
      if (now - st.st_mtime > kStaleTemporarySeconds) unlinkat(directoryFd_, d->d_name, 0);
    } else if (isLockName(name)) {
      removeUnheldLock(directoryFd_, d->d_name);  // left by a killed builder
    } else if (keyFromName(name)) {
      entries.push_back({std::string(name), static_cast<uint64_t>(st.st_size), st.st_mtim});
      total += static_cast<uint64_t>(st.st_size);
    }
  }
  if (total <= maxSize_) return total;
  std::sort(entries.begin(), entries.end(), [](const File &a, const File &b) {
    return a.used.tv_sec != b.used.tv_sec ? a.used.tv_sec < b.used.tv_sec : a.used.tv_nsec < b.used.tv_nsec;
  });
  for (const File &entry : entries) {
    if (total <= maxSize_) break;
    // Another process may evict the same file: it is gone either way.
    if (unlinkat(directoryFd_, entry.name.c_str(), 0) == 0 || errno == ENOENT) {
      total -= entry.size;
      ++stats_.evicted;
    }
  }
  report("evicted the least recently used entries down to " + bytesText(total) + " (bound " + bytesText(maxSize_) + ")");
  return total;
}

llvm::Expected<std::vector<EntryFile>> DiskCache::list() const {
  auto dir = openListing(directory_);
  if (!dir) return dir.takeError();
  std::vector<EntryFile> files;
  if (!*dir) return files;
  const uid_t user = geteuid();
  while (const dirent *d = readdir(dir->get())) {
    const std::optional<Key> key = keyFromName(d->d_name);
    if (!key) continue;
    EntryFile file;
    file.key = *key;
    file.path = pathOf(d->d_name);
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
  auto dir = openListing(directory_);
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
      firstKept = pathOf(d->d_name) + ": " + errnoText();
    }
  }
  // The tally goes with them (not counted: bookkeeping); the next store counts what is left.
  unlinkat(dirfd(dir->get()), kTallyName, 0);
  if (kept)
    return fail(ErrorCode::Io, "deleted " + std::to_string(deleted) + " files, but not " + std::to_string(kept) +
                                   " (" + firstKept + (kept > 1 ? ", and more" : "") + ")");
  return deleted;
}

}  // namespace devdl::cache
