// Opening a handle: the files an open reads, read with the loader's mutex let go, added as one
// transaction (Handles::Open) that a failure takes back, and linked now with DEVDL_NOW; a handle
// open already, referenced once more. The entry points that open are loader.cpp's.
#pragma once

#include "loader/candidacies.h"
#include "loader/handles.h"
#include "loader/image_table.h"
#include "loader/loader_lock.h"
#include "loader/places.h"
#include "loader/programs.h"
#include "loader/reading.h"
#include "support/regular_file.h"

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/Support/Error.h>

#include <cstdint>
#include <memory>
#include <string>

namespace devdl {

class Opener {
 public:
  struct Parts {
    ImageTable &images;
    Places &places;
    Candidacies &candidacies;
    Programs &programs;
    Handles &handles;
    FileReader &reader;
  };
  explicit Opener(Parts parts) : parts_(parts), images_(parts.images) {}

  /// The handle for `identity` (named `name` in errors): the one open, or a new one from what
  /// `read` reads with the mutex let go, with the files its images need (`file`, where it is one:
  /// $ORIGIN is its directory, and its handle keeps it open). A failed open leaves nothing.
  llvm::Expected<Handle *> open(LoaderLock &lock, const FileIdentity &identity, int flags, const std::string &name,
                                std::shared_ptr<const RegularFile> file,
                                llvm::function_ref<llvm::Expected<ImageFile>()> read);
  /// Links the programs of the handle's kernels and resolves its other images (DEVDL_NOW), on the
  /// devices of `place`; resolves the images of the handles it holds, which are linked as used.
  llvm::Error linkNow(LoaderLock &lock, Handle &handle, unsigned place = 0);

 private:
  /// An open handle, referenced once more (linked now with DEVDL_NOW), or as it was.
  llvm::Expected<Handle *> reopen(LoaderLock &lock, Handle &handle, int flags);
  /// Success where every import image `id` reaches resolves at `place` (nothing is linked).
  llvm::Error resolvesNow(uint32_t id, unsigned place);

  Parts parts_;
  ImageTable &images_;
};

}  // namespace devdl
