// What a name is bound to in a handle's scope, and the program it is taken from (linked if need
// be): the way into device_dlsym, device_dlsyminfo, device_dlread and device_dlwrite, and
// device_dlplan; and the image of a handle's scope that defines a registered object, the way into
// device_dlread_object, device_dlwrite_object and device_dlspecialize_object. The scopes' order:
// loader/loader.h.
#pragma once

#include "loader/candidacies.h"
#include "loader/handles.h"
#include "loader/image_table.h"
#include "loader/loader_lock.h"
#include "loader/places.h"
#include "loader/process_scan.h"
#include "loader/programs.h"
#include "resolve/scopes.h"

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/Support/Error.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace devdl {

class Lookups {
 public:
  struct Parts {
    ImageTable &images;
    const Scopes &scopes;
    Handles &handles;
    Candidacies &candidacies;
    Programs &programs;
    Places &places;
    ProcessScan &scan;
  };
  explicit Lookups(Parts parts) : parts_(parts), images_(parts.images) {}

  /// What a name is bound to in a handle's scope: its definition, and for one among the
  /// handle's dependencies the handle's image whose imports reach it; on the devices of `place`
  /// (the view's, if looked up in a view).
  struct Found {
    Definition definition;
    std::optional<uint32_t> through;
    unsigned place;
  };
  llvm::Expected<Found> lookup(LoaderLock &lock, void *handle, std::string_view name);
  /// The program a name found in a handle's scope is taken from (linked now if need be), with
  /// the definition and its image's label; the mutex is let go when it returns.
  struct Located {
    std::shared_ptr<backend::Program> program;
    Definition definition;
    std::string label;
    const void *hostAddress;  // in the host object whose image it is, for the global scope's lookups
  };
  llvm::Expected<Located> locate(LoaderLock &lock, void *handle, std::string_view name);
  /// The registered object at `object` of `kind`, and the first image of the handle's scope
  /// (its images, then the global scope) that `has` it: its unique id and the image's id. `what`
  /// names the entry point in errors.
  llvm::Expected<std::pair<std::string, uint32_t>> objectIn(LoaderLock &lock, void *handle, const void *object,
                                                            std::string_view kind, std::string_view what,
                                                            llvm::function_ref<bool(const DeviceImage &,
                                                                                    std::string_view)> has);

 private:
  /// The first definition of `name` among the images the handle's images depend on, with the
  /// handle's image that reaches it; nullopt when none of them defines it.
  std::optional<Found> inDependencies(const Handle &handle, std::string_view name, unsigned place);
  /// The first of the handle's images whose imports reach image `id`; nullopt when none does.
  std::optional<uint32_t> imageReaching(const Handle &handle, uint32_t id, unsigned place);

  Parts parts_;
  ImageTable &images_;
};

}  // namespace devdl
