#include "loader/files.h"
#include "support/error.h"

#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringRef.h>

#include <fcntl.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <cerrno>

#include <cstdlib>
#include <cstring>

namespace devdl {

std::string findFile(const char *path) {
  if (std::strchr(path, '/')) return path;
  const char *list = getauxval(AT_SECURE) ? nullptr : std::getenv("DEVDL_LIBRARY_PATH");
  for (llvm::StringRef rest = list ? list : ""; !rest.empty();) {
    auto [dir, tail] = rest.split(':');
    rest = tail;
    if (dir.empty()) continue;
    std::string candidate = dir.str() + "/" + path;
    if (access(candidate.c_str(), R_OK) == 0) return candidate;
  }
  return path;
}

llvm::Expected<OpenFile> OpenFile::open(const std::string &path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return inFile(fail(errno == ENOENT ? ErrorCode::NotFound : ErrorCode::Io, std::strerror(errno)), path);
  OpenFile file(path, fd, {});
  if (fstat(fd, &file.stat_) != 0) return inFile(fail(ErrorCode::Io, std::strerror(errno)), path);
  if (S_ISDIR(file.stat_.st_mode)) return inFile(fail(ErrorCode::Io, std::strerror(EISDIR)), path);
  return file;
}

OpenFile::~OpenFile() {
  if (fd_ >= 0) ::close(fd_);
}

llvm::Expected<ImageFile> OpenFile::read() const {
  return readImageFile(fd_, S_ISREG(stat_.st_mode) ? static_cast<uint64_t>(stat_.st_size) : ~uint64_t(0), path_);
}

std::vector<std::string> preloadList(const char *list) {
  std::vector<std::string> items;
  llvm::SmallVector<llvm::StringRef, 8> parts;
  llvm::SplitString(list ? list : "", parts, " :");
  for (llvm::StringRef part : parts) items.push_back(part.str());
  return items;
}

}  // namespace devdl
