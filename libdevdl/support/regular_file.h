// Reading files devdl is named, as the host loader reads libraries: only regular files, and what
// is read is a copy. A device, FIFO or socket is refused (/dev/zero never ends; a FIFO without a
// writer would block for ever), and nothing is mapped: a mapping shows another process's writes
// to the file after its content was hashed, and faults (SIGBUS) where the file was cut short.
#pragma once

#include <llvm/Support/Error.h>
#include <llvm/Support/MemoryBuffer.h>

#include <sys/stat.h>

#include <memory>
#include <string>

namespace devdl {

/// A regular file open for reading, and its status when opened.
class RegularFile {
 public:
  /// Opens `path`; fails naming it: missing (NotFound), unreadable (Io), or not a regular file
  /// (Io, naming its kind: "not a regular file (FIFO)").
  static llvm::Expected<RegularFile> open(const std::string &path);
  RegularFile(RegularFile &&other) noexcept : path_(std::move(other.path_)), fd_(other.fd_), status_(other.status_) {
    other.fd_ = -1;
  }
  RegularFile(const RegularFile &) = delete;
  RegularFile &operator=(const RegularFile &) = delete;
  ~RegularFile();

  const std::string &path() const { return path_; }
  const struct stat &status() const { return status_; }
  /// Its bytes, read into memory: as many as it had when opened, or those left if it was cut short
  /// meanwhile.
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> read() const;

 private:
  RegularFile(std::string path, int fd) : path_(std::move(path)), fd_(fd), status_{} {}
  std::string path_;
  int fd_;
  struct stat status_;
};

}  // namespace devdl
