// Where device_dlopen finds a file and how it reads it, and the lists of files the environment
// names, as the host loader reads LD_LIBRARY_PATH and LD_PRELOAD.
#pragma once

#include "image/read_image.h"

#include <llvm/Support/Error.h>

#include <sys/stat.h>

#include <string>
#include <vector>

namespace devdl {

/// The file a name stands for: a name with a slash is taken as it is; one without is looked for
/// in DEVDL_LIBRARY_PATH's directories, then taken as it is. Like LD_LIBRARY_PATH, the variable
/// is ignored in secure-execution (setuid) processes.
std::string findFile(const char *path);

/// A file opened once: what identifies it and what is read from it are the same file's, whatever
/// is renamed over its path meanwhile.
class OpenFile {
 public:
  /// Opens `path`; fails naming it (NotFound, Io; a directory is refused).
  static llvm::Expected<OpenFile> open(const std::string &path);
  OpenFile(OpenFile &&other) noexcept : path_(std::move(other.path_)), fd_(other.fd_), stat_(other.stat_) { other.fd_ = -1; }
  OpenFile(const OpenFile &) = delete;
  OpenFile &operator=(const OpenFile &) = delete;
  ~OpenFile();

  dev_t device() const { return stat_.st_dev; }
  ino_t inode() const { return stat_.st_ino; }
  /// Its images: of a regular file, as many bytes as it had when opened; of anything else (a
  /// pipe), all it gives.
  llvm::Expected<ImageFile> read() const;

 private:
  OpenFile(std::string path, int fd, const struct stat &st) : path_(std::move(path)), fd_(fd), stat_(st) {}
  std::string path_;
  int fd_;
  struct stat stat_;
};

/// The items of a list separated by spaces or colons, as LD_PRELOAD's.
std::vector<std::string> preloadList(const char *list);

}  // namespace devdl
