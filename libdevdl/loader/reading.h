// What an open reads with the loader's mutex let go, as ld.so maps an object and then its
// DT_NEEDED libraries: the file (or memory), its images with their candidacy, and each file its
// images need, breadth first, each once, found by name from the image that needs it (files.h).
#pragma once

#include "store/disk_cache.h"
#include "image/read_image.h"
#include "loader/candidacies.h"
#include "support/regular_file.h"

#include <llvm/Support/Error.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <sys/types.h>
#include <vector>

namespace devdl {

/// What makes a second open the same: the file, unchanged since it was read (its size and
/// modification time: one written over in place is another), or the memory.
struct FileIdentity {
  dev_t device;
  ino_t inode;
  const void *memory;
  size_t size;  // the same address, or inode, with another size holds another image
  int64_t modified = 0;  // in nanoseconds, for a file
  bool operator==(const FileIdentity &) const = default;
  static FileIdentity of(const RegularFile &file) {
    const struct stat &status = file.status();
    return {status.st_dev, status.st_ino, nullptr, static_cast<size_t>(status.st_size),
            int64_t(status.st_mtim.tv_sec) * 1000000000 + status.st_mtim.tv_nsec};
  }
};

/// A file an open reads (or its memory), and then each file its images need.
struct OpenedFile {
  std::string name;  // its path as found (or the memory's name)
  bool isFile;       // $ORIGIN is its directory
  FileIdentity identity;
  bool open;  // a handle had it when the mutex was let go: not read, and what it needs is its handle's
  std::vector<NewImage> images;
  std::vector<std::vector<size_t>> needs;  // by image: the files it needs, as indexes among the open's
  std::shared_ptr<const RegularFile> file;  // for its handle (Handle::file); null for memory
};

class FileReader {
 public:
  /// `summaries`: the disk cache that keeps image files' summaries (store/image_summary.h); none
  /// where null.
  FileReader(Candidacies &candidacies, store::DiskCache &(*summaries)())
      : candidacies_(candidacies), summaries_(summaries) {}

  /// The images of a file: from its summary where the disk cache has one, else read (and
  /// summarized for the next process).
  llvm::Expected<ImageFile> readFile(const std::shared_ptr<const RegularFile> &file) const;
  /// The images read, each with its acceptance (Candidacies::accept).
  std::vector<NewImage> accept(ImageFile read, bool mayOpenDevice) const;
  /// `first`, then the files its images need, breadth first, each once, found by name from the
  /// image that needs each (files.h) and read; those `open` has are not read. Fails naming a file
  /// not found and what needs it.
  llvm::Expected<std::vector<OpenedFile>> readNeeded(OpenedFile first, const std::vector<FileIdentity> &open,
                                                     bool mayOpenDevice) const;
  /// A file found for an open (a needed one, a host object's, DEVDL_PRELOAD's), read with its
  /// images' acceptance, unless `open` has it.
  llvm::Expected<OpenedFile> readOpened(RegularFile file, const std::vector<FileIdentity> &open,
                                        bool mayOpenDevice) const;

 private:
  Candidacies &candidacies_;
  store::DiskCache &(*const summaries_)();
};

}  // namespace devdl
