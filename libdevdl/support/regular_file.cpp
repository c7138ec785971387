#include "support/regular_file.h"
#include "support/error.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
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

// A large file's bytes go to memory mapped for them with every page made at once: one call,
// where a buffer from the heap takes a page fault for each page the read touches (an 800 KB
// image: 200 faults, a third of its read time measured here).
// Under AddressSanitizer every file is read into the heap, where reads past its bytes are seen.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

class PopulatedBuffer final : public llvm::MemoryBuffer {
 public:
  static constexpr size_t kFrom = kAddressSanitizer ? SIZE_MAX : 64 * 1024;

  static std::unique_ptr<PopulatedBuffer> make(size_t size, std::string name) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t mapped = (size + page - 1) / page * page;
    void *start = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (start == MAP_FAILED) return nullptr;
    return std::unique_ptr<PopulatedBuffer>(new PopulatedBuffer(static_cast<char *>(start), size, mapped, std::move(name)));
  }
  ~PopulatedBuffer() override { munmap(start_, mapped_); }

  char *bytes() const { return start_; }
  llvm::StringRef getBufferIdentifier() const override { return name_; }
  BufferKind getBufferKind() const override { return MemoryBuffer_MMap; }

 private:
  PopulatedBuffer(char *start, size_t size, size_t mapped, std::string name)
      : start_(start), mapped_(mapped), name_(std::move(name)) {
    init(start, start + size, /*RequiresNullTerminator=*/false);
  }
  char *start_;
  size_t mapped_;
  std::string name_;
};

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
  std::unique_ptr<llvm::MemoryBuffer> buffer;
  char *bytes = nullptr;
  if (size >= PopulatedBuffer::kFrom) {
    auto populated = PopulatedBuffer::make(size, path_);
    if (populated) bytes = populated->bytes();
    buffer = std::move(populated);
  } else {
    auto plain = llvm::WritableMemoryBuffer::getNewUninitMemBuffer(size, path_);
    if (plain) bytes = plain->getBufferStart();
    buffer = std::move(plain);
  }
  if (!buffer) return inFile(fail(ErrorCode::Io, std::strerror(ENOMEM)), path_);
  size_t done = 0;
  while (done < size) {
    const ssize_t got = pread(fd_, bytes + done, size - done, static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return inFile(fail(ErrorCode::Io, std::strerror(errno)), path_);
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  if (done < size) return llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(bytes, done), path_);
  return buffer;
}

}  // namespace devdl
