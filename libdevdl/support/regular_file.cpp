#include "support/regular_file.h"
#include "support/error.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace devdl {

namespace {

const char *kindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "directory";
  if (S_ISCHR(mode)) return "character device";
  if (S_ISBLK(mode)) return "block device";
  if (S_ISFIFO(mode)) return "FIFO";
  if (S_ISSOCK(mode)) return "socket";
  return "unknown kind";
}

}  // namespace

llvm::Expected<RegularFile> RegularFile::open(const std::string &path) {
  // O_NONBLOCK: opening a FIFO waits for a writer; a regular file reads the same with it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return inFile(fail(errno == ENOENT ? ErrorCode::NotFound : ErrorCode::Io, std::strerror(errno)), path);
  RegularFile file(path, fd);
  if (fstat(fd, &file.status_) != 0) return inFile(fail(ErrorCode::Io, std::strerror(errno)), path);
  if (!S_ISREG(file.status_.st_mode))
    return inFile(fail(ErrorCode::Io, llvm::Twine("not a regular file (") + kindOf(file.status_.st_mode) + ")"), path);
  return file;
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> RegularFile::read() const {
  // Read, not mapped (LLVM's getOpenFile maps files of 16 KiB and more).
  const size_t size = static_cast<size_t>(status_.st_size);
  auto buffer = llvm::WritableMemoryBuffer::getNewUninitMemBuffer(size, path_);
  if (!buffer) return inFile(fail(ErrorCode::Io, std::strerror(ENOMEM)), path_);
  size_t done = 0;
  while (done < size) {
    const ssize_t got = pread(fd_, buffer->getBufferStart() + done, size - done, static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return inFile(fail(ErrorCode::Io, std::strerror(errno)), path_);
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  if (done < size) return llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(buffer->getBufferStart(), done), path_);
  return std::move(buffer);
}

}  // namespace devdl
