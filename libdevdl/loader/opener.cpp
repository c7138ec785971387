// Opening a handle: read with the mutex let go, added as one transaction, linked now with
// DEVDL_NOW (loader/opener.h).
#include "loader/opener.h"

#include "support/error.h"

#include "devdl.h"

#include <llvm/ADT/STLExtras.h>

namespace devdl {

llvm::Expected<Handle *> Opener::open(LoaderLock &lock, const FileIdentity &identity, int flags,
                                      const std::string &name, std::shared_ptr<const RegularFile> opened,
                                      llvm::function_ref<llvm::Expected<ImageFile>()> read) {
  for (;;) {
    if (Handle *open = parts_.handles.find(identity)) return reopen(lock, *open, flags);
    if (flags & DEVDL_NOLOAD) return fail(ErrorCode::NotFound, name + ": not loaded (DEVDL_NOLOAD)");
    const std::vector<FileIdentity> open = parts_.handles.identities();
    // Read, with the files it needs, and their candidacy decided (devices may be opened now),
    // with the mutex let go.
    lock.letGo();
    auto files = [&]() -> llvm::Expected<std::vector<OpenedFile>> {
      auto file = read();
      if (!file) return file.takeError();
      OpenedFile first{file->name, opened != nullptr, identity, false, {}, {}, opened};
      first.images = parts_.reader.accept(std::move(*file), /*mayOpenDevice=*/true);
      return parts_.reader.readNeeded(std::move(first), open, /*mayOpenDevice=*/true);
    }();
    lock.takeAgain();
    if (!files) return files.takeError();
    if (parts_.handles.find(identity)) continue;  // another thread opened it meanwhile: that handle
    Handles::Open transaction(parts_.handles);
    auto handle = parts_.handles.add(*files, flags, transaction.record());
    if (!handle) return handle.takeError();
    if (!handle->settled()) continue;  // a file it needs, open before, was closed meanwhile: read it
    // As RTLD_NOW: linked now, or the open fails and leaves nothing behind, NODELETE or not.
    if (flags & DEVDL_NOW)
      if (llvm::Error err = linkNow(lock, ***handle)) return err;
    transaction.keep();
    return **handle;
  }
}

llvm::Expected<Handle *> Opener::reopen(LoaderLock &lock, Handle &handle, int flags) {
  // As dlopen(RTLD_NOW) of a library loaded lazily: its links are made now, or the open fails
  // and the handle stays as it was. Promoted first, as a first open with DEVDL_GLOBAL joins the
  // global scope before it links: its images' imports may be bound to one another there. The
  // reference taken first keeps it while the mutex is let go.
  Handles::Open transaction(parts_.handles);
  parts_.handles.reference(handle, transaction.record());
  if (flags & DEVDL_GLOBAL) parts_.handles.makeGlobal(handle, transaction.record());
  if ((flags & DEVDL_NOW) && !handle.linkedNow)
    if (llvm::Error err = linkNow(lock, handle)) return err;
  transaction.keep();
  handle.nodelete |= (flags & DEVDL_NODELETE) != 0;
  return &handle;
}

llvm::Error Opener::linkNow(LoaderLock &lock, Handle &handle, unsigned place) {
  // As RTLD_NOW: every import of every image resolves now, kernels or not; the kernels'
  // programs are linked now.
  parts_.candidacies.decide(lock, place);
  for (uint32_t id : handle.images) {
    const bool hasKernel =
        llvm::any_of(images_[id].image.symbols, [](const Symbol &s) { return s.kind == SymbolKind::Kernel; });
    if (hasKernel) {
      auto program = parts_.programs.programFor(lock, id, place);
      if (!program) return program.takeError();
      continue;
    }
    if (llvm::Error err = resolvesNow(id, place)) return err;
  }
  // What the handle holds is linked as its kernels are used, but its imports resolve now, as
  // RTLD_NOW binds a library's dependencies' relocations too.
  for (size_t i = 0; i < handle.needed.size(); ++i)
    if (parts_.handles.find(handle.needed[i]))
      for (uint32_t id : handle.needed[i]->images)
        if (llvm::Error err = resolvesNow(id, place)) return err;
  handle.linkedNow = true;
  return llvm::Error::success();
}

llvm::Error Opener::resolvesNow(uint32_t id, unsigned place) {
  const uint32_t roots[] = {id};
  const Planner planner = parts_.programs.planner(parts_.places.placeFor(images_[id].image, place));
  return planner.unresolvedError(planner.plan(roots));
}

}  // namespace devdl
