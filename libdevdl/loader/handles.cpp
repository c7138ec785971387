// Handles made, referenced, made global, reverted and unloaded, as ld.so keeps its link maps.
#include "loader/handles.h"

#include "devdl.h"

#include <llvm/ADT/STLExtras.h>

namespace devdl {

Handle *Handles::find(const void *pointer) const {
  auto it = llvm::find_if(handles_, [&](const auto &h) { return h.get() == pointer; });
  return it == handles_.end() ? nullptr : it->get();
}

Handle *Handles::find(const FileIdentity &identity) const {
  auto it = llvm::find_if(handles_, [&](const auto &h) { return h->identity == identity; });
  return it == handles_.end() ? nullptr : it->get();
}

std::optional<Handles::Target> Handles::targetOf(const void *pointer) const {
  if (pointer == &globalScopeTag_ || find(pointer)) return Target{const_cast<void *>(pointer), 0};
  for (const auto &view : views_)
    if (view.get() == pointer) return Target{view->handle, view->place};
  return std::nullopt;
}

View *Handles::viewOf(const void *handle, unsigned place) const {
  for (const auto &view : views_)
    if (view->handle == handle && view->place == place) return view.get();
  return nullptr;
}

View *Handles::addView(void *handle, unsigned place) {
  views_.push_back(std::make_unique<View>(View{handle, place}));
  return views_.back().get();
}

std::vector<FileIdentity> Handles::identities() const {
  std::vector<FileIdentity> open;
  for (const auto &handle : handles_) open.push_back(handle->identity);
  return open;
}

llvm::Expected<Outcome<Handle *>> Handles::add(std::vector<OpenedFile> &files, int flags, OpenRecord &record) {
  std::vector<Handle *> handles(files.size(), nullptr);
  for (size_t i = 0; i < files.size(); ++i)
    if (files[i].open && !(handles[i] = find(files[i].identity))) return Outcome<Handle *>::lookAgain();
  // The new handles, in the order they were found: the first is the one opened.
  std::vector<Handle *> added;
  for (size_t i = 0; i < files.size(); ++i) {
    if (handles[i]) continue;
    if ((handles[i] = find(files[i].identity))) continue;  // opened meanwhile by another thread
    auto handle = std::make_unique<Handle>();
    handle->path = files[i].name;
    handle->identity = files[i].identity;
    handle->file = std::move(files[i].file);
    handle->nodelete = i == 0 && (flags & DEVDL_NODELETE) != 0;
    handle->local.deepbind = (flags & DEVDL_DEEPBIND) != 0;
    std::vector<NewImage> &images = files[i].images;
    for (size_t k = 0; k < images.size(); ++k) {
      const uint32_t id =
          images_.add(std::move(images[k].image), handle->path, static_cast<unsigned>(k), handle.get(), &handle->local);
      candidacies_.arrived(id, std::move(images[k].acceptance));
      handle->images.push_back(id);
      handle->local.add(images_[id].image, id);
    }
    handles[i] = handle.get();
    added.push_back(handle.get());
    record.added.push_back(handle.get());
    handles_.push_back(std::move(handle));
  }
  // The open's reference is the first's; the others are referenced by those that need them.
  reference(*handles[0], record);
  for (size_t i = 0; i < files.size(); ++i)
    if (llvm::is_contained(added, handles[i]))
      for (size_t k = 0; k < files[i].needs.size(); ++k)
        for (size_t needed : files[i].needs[k]) images_[handles[i]->images[k]].needs.push_back(handles[needed]);
  for (size_t i = 0; i < added.size(); ++i)
    if (llvm::Error err = addDependencies(*added[i], llvm::ArrayRef(added).take_front(i))) return err;
  if (flags & DEVDL_GLOBAL) makeGlobal(*handles[0], record);
  return Outcome(handles[0]);
}

void Handles::reference(Handle &handle, OpenRecord &record) {
  ++handle.references;
  record.referenced = &handle;
}

void Handles::makeGlobal(Handle &handle, OpenRecord &record) {
  std::vector<Handle *> handles{&handle};
  handles.insert(handles.end(), handle.needed.begin(), handle.needed.end());
  for (Handle *each : handles)
    if (!each->global) {
      each->global = true;
      globalScope_.join(each->images);
      record.promoted.push_back(each);
    }
}

void Handles::revert(const OpenRecord &record) {
  if (!record.referenced && record.added.empty() && record.promoted.empty()) return;  // it added nothing
  // As glibc's dlopen leaves the global scope as it was when an open fails: the handles open
  // before that it made global leave it (the new ones leave everything as they are unloaded).
  for (Handle *handle : record.promoted)
    if (find(handle) && handle->global && !llvm::is_contained(record.added, handle)) {
      handle->global = false;
      globalScope_.leave(handle->images);
    }
  for (Handle *handle : record.added) handle->nodelete = false;
  if (record.referenced && find(record.referenced)) dropReference(*record.referenced);
  // Made but held by nothing: a dependency's failure stopped the open before those that need
  // them held them. Those another has come to hold meanwhile stay.
  for (Handle *handle : record.added)
    if (find(handle) && handle->references == 0) unload(*handle);
  Generation::move();
}

void Handles::dropReference(Handle &handle) {
  if (--handle.references > 0 || handle.nodelete) return;
  unload(handle);
}

void Handles::unload(Handle &handle) {
  const std::vector<Handle *> needed = std::move(handle.needed);
  // An image of a cycle of needed files may outlive this file it needs (Handle::needed).
  for (uint32_t id = 0; id < images_.end(); ++id)
    if (images_.contains(id)) llvm::erase_value(images_[id].needs, &handle);
  dropImages(handle.images);
  llvm::erase_if(views_, [&](const auto &view) { return view->handle == &handle; });
  handles_.erase(llvm::find_if(handles_, [&](const auto &h) { return h.get() == &handle; }));
  // Then what it kept open, as dlclose closes the DT_NEEDED libraries of an object it unloads.
  for (Handle *dependency : needed)
    if (find(dependency) && dependency->references > 0) dropReference(*dependency);
}

llvm::Error Handles::addDependencies(Handle &handle, std::span<Handle *const> unheld) {
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

std::optional<uint32_t> Handles::findModule(std::string_view module, const Handle &handle) const {
  auto is = [&](uint32_t id) { return images_[id].image.moduleId() == module; };
  for (uint32_t id : handle.images)
    if (is(id)) return id;
  for (uint32_t id : scopes_.globalOrder())
    if (is(id)) return id;
  for (uint32_t id = 0; id < images_.end(); ++id)
    if (images_.contains(id) && images_[id].loaded && is(id)) return id;
  return std::nullopt;
}

void Handles::dropImages(std::span<const uint32_t> ids) {
  scopes_.leave(ids, images_.pointers());
  // A host object's images may be another handle's recorded dependencies.
  for (const auto &handle : handles_) handle->local.remove(ids, images_.pointers());
  for (uint32_t id : ids) images_.unload(id);
  programs_.dropPlans(ids);
  Generation::move();
}

}  // namespace devdl
