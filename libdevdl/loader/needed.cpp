// What a handle's images need, as ld.so loads DT_NEEDED: the files they name, found and read
// with the lock let go, breadth first, each once; the handles made for them; each handle's local
// scope (its images, then what they need: files and modules); and DEVDL_GLOBAL for all of them.
#include "loader/loader.h"

#include "loader/files.h"
#include "support/error.h"

#include "devdl.h"

#include <llvm/ADT/STLExtras.h>

namespace devdl {

llvm::Expected<std::vector<Loader::OpenedFile>> Loader::readNeeded(OpenedFile first,
                                                                   const std::vector<Handle::Identity> &open,
                                                                   bool mayOpenDevice) {
  // As ld.so loads DT_NEEDED: breadth first, each file once, however many need it.
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
        const Handle::Identity identity = Handle::Identity::of(*opened);
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

llvm::Expected<Loader::OpenedFile> Loader::readOpened(RegularFile file, const std::vector<Handle::Identity> &open,
                                                      bool mayOpenDevice) {
  OpenedFile opened{file.path(), true, Handle::Identity::of(file), false, {}, {}, nullptr};
  opened.open = llvm::is_contained(open, opened.identity);
  if (opened.open) return opened;
  opened.file = std::make_shared<const RegularFile>(std::move(file));
  auto read = readFile(opened.file);
  if (!read) return read.takeError();
  opened.images = prepare(std::move(*read), mayOpenDevice);
  return opened;
}

llvm::Expected<Handle *> Loader::addHandles(std::vector<OpenedFile> &files, int flags) {
  std::vector<Handle *> handles(files.size(), nullptr);
  for (size_t i = 0; i < files.size(); ++i)
    if (files[i].open && !(handles[i] = findHandle(files[i].identity))) return nullptr;
  // The new handles, in the order they were found: the first is the one opened.
  std::vector<Handle *> added;
  for (size_t i = 0; i < files.size(); ++i) {
    if (handles[i]) continue;
    if ((handles[i] = findHandle(files[i].identity))) continue;  // opened meanwhile by another thread
    auto handle = std::make_unique<Handle>();
    handle->path = files[i].name;
    handle->identity = files[i].identity;
    handle->file = std::move(files[i].file);
    handle->references = i == 0 ? 1 : 0;  // the others are referenced by those that need them
    handle->nodelete = i == 0 && (flags & DEVDL_NODELETE) != 0;
    handle->local.deepbind = (flags & DEVDL_DEEPBIND) != 0;
    std::vector<NewImage> &images = files[i].images;
    for (size_t k = 0; k < images.size(); ++k) {
      const uint32_t id = images_.add(std::move(images[k].image), handle->path, static_cast<unsigned>(k), handle.get());
      images_[id].candidacy = images[k].candidacy;
      images_[id].whyNot = std::move(images[k].whyNot);
      if (images_[id].candidacy == Candidacy::Undecided) undecided_.push_back(id);
      handle->images.push_back(id);
      handle->local.add(images_[id].image, id);
    }
    handles[i] = handle.get();
    added.push_back(handle.get());
    handles_.push_back(std::move(handle));
  }
  for (size_t i = 0; i < files.size(); ++i)
    if (llvm::is_contained(added, handles[i]))
      for (size_t k = 0; k < files[i].needs.size(); ++k)
        for (size_t needed : files[i].needs[k]) images_[handles[i]->images[k]].needs.push_back(handles[needed]);
  for (size_t i = 0; i < added.size(); ++i)
    if (llvm::Error err = addDependencies(*added[i], llvm::ArrayRef(added).take_front(i))) {
      for (Handle *handle : added)
        for (Handle *needed : handle->needed) --needed->references;
      for (Handle *handle : added) {
        dropImages(handle->images);
        handles_.erase(llvm::find_if(handles_, [&](const auto &h) { return h.get() == handle; }));
      }
      return err;
    }
  if (flags & DEVDL_GLOBAL) makeGlobal(*handles[0]);
  return handles[0];
}

llvm::Error Loader::addDependencies(Handle &handle, std::span<Handle *const> unheld) {
  // As DT_NEEDED: breadth first over what the images need, each once.
  auto take = [&](uint32_t dependency) {
    if (llvm::is_contained(handle.local.images, dependency)) return;
    handle.local.add(images_[dependency].image, dependency);
    Handle *owner = images_[dependency].owner;
    if (owner && owner != &handle && !llvm::is_contained(handle.needed, owner) && !llvm::is_contained(unheld, owner)) {
      ++owner->references;
      handle.needed.push_back(owner);
    }
  };
  for (size_t next = 0; next < handle.local.images.size(); ++next) {
    const uint32_t id = handle.local.images[next];
    for (const Handle *file : images_[id].needs)
      for (uint32_t needed : file->images) take(needed);
    for (std::string_view module : images_[id].image.dependencies()) {
      const std::optional<uint32_t> dependency = findModule(module, handle);
      if (!dependency)
        return fail(ErrorCode::NotFound, images_[id].label + ": depends on module `" + std::string(module) +
                                             "`, which no loaded image is");
      take(*dependency);
    }
  }
  return llvm::Error::success();
}

std::vector<Handle *> Loader::makeGlobal(Handle &handle) {
  std::vector<Handle *> joined, handles{&handle};
  handles.insert(handles.end(), handle.needed.begin(), handle.needed.end());
  for (Handle *each : handles)
    if (!each->global) {
      each->global = true;
      joinGlobalScope(each->images);
      joined.push_back(each);
    }
  return joined;
}

std::optional<uint32_t> Loader::findModule(std::string_view module, const Handle &handle) const {
  auto is = [&](uint32_t id) { return images_[id].image.moduleId() == module; };
  for (uint32_t id : handle.images)
    if (is(id)) return id;
  for (uint32_t id : scopes_.globalOrder())
    if (is(id)) return id;
  for (uint32_t id = 0; id < images_.end(); ++id)
    if (images_.contains(id) && images_[id].loaded && is(id)) return id;
  return std::nullopt;
}

}  // namespace devdl
