// As ld.so loads DT_NEEDED: breadth first, each file once, however many need it.
#include "loader/reading.h"

#include "store/image_summary.h"
#include "loader/files.h"

#include <llvm/ADT/STLExtras.h>

namespace devdl {

llvm::Expected<ImageFile> FileReader::readFile(const std::shared_ptr<const RegularFile> &file) const {
  return store::readImageFileSummarized(file, summaries_ ? &summaries_() : nullptr);
}

std::vector<NewImage> FileReader::accept(ImageFile read, bool mayOpenDevice) const {
  std::vector<NewImage> images;
  for (DeviceImage &image : read.images) images.push_back(candidacies_.accept(std::move(image), mayOpenDevice));
  return images;
}

llvm::Expected<std::vector<OpenedFile>> FileReader::readNeeded(OpenedFile first, const std::vector<FileIdentity> &open,
                                                               bool mayOpenDevice) const {
  std::vector<OpenedFile> files;
  files.push_back(std::move(first));
  for (size_t i = 0; i < files.size(); ++i) {
    if (files[i].open) continue;
    files[i].needs.resize(files[i].images.size());
    for (size_t j = 0; j < files[i].images.size(); ++j) {
      // Copied: files grows below.
      const DeviceImage &image = files[i].images[j].image;
      const std::string neederName = files[i].name, runPath(image.runPath());
      const bool neederIsFile = files[i].isFile;
      std::vector<std::string> names;
      for (std::string_view name : image.neededFiles()) names.emplace_back(name);
      for (const std::string &name : names) {
        const Needer needer{neederName, neederIsFile, runPath};
        auto opened = openNamedFile(name.c_str(), &needer);
        if (!opened) return opened.takeError();
        const FileIdentity identity = FileIdentity::of(*opened);
        auto known = llvm::find_if(files, [&](const OpenedFile &file) { return file.identity == identity; });
        const size_t index = static_cast<size_t>(known - files.begin());
        if (known == files.end()) {
          auto next = readOpened(std::move(*opened), open, mayOpenDevice);
          if (!next) return next.takeError();
          files.push_back(std::move(*next));
        }
        files[i].needs[j].push_back(index);
      }
    }
  }
  return files;
}

llvm::Expected<OpenedFile> FileReader::readOpened(RegularFile file, const std::vector<FileIdentity> &open,
                                                  bool mayOpenDevice) const {
  OpenedFile opened{file.path(), true, FileIdentity::of(file), false, {}, {}, nullptr};
  opened.open = llvm::is_contained(open, opened.identity);
  if (opened.open) return opened;
  opened.file = std::make_shared<const RegularFile>(std::move(file));
  auto read = readFile(opened.file);
  if (!read) return read.takeError();
  opened.images = accept(std::move(*read), mayOpenDevice);
  return opened;
}

}  // namespace devdl
