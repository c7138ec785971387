// Whether the device that links each loaded image takes it (Acceptance): decided as an image
// arrives, with the loader's mutex let go; or, where deciding would open a device (a scan of the
// host's objects, maybe in a host constructor: the OpenCL ICD loader, once started, loads its
// vendors under a lock of its own), left Undecided and decided before anything resolves.
#pragma once

#include "backend/registry.h"
#include "loader/image_table.h"
#include "loader/loader_lock.h"
#include "loader/places.h"

#include <llvm/ADT/STLFunctionalExtras.h>

#include <cstdint>
#include <vector>

namespace devdl {

/// An image read with the mutex let go, and its acceptance by its default device.
struct NewImage {
  DeviceImage image;
  Acceptance acceptance;
};

class Candidacies {
 public:
  Candidacies(ImageTable &images, backend::Devices &devices, Places &places)
      : images_(images), devices_(devices), places_(places) {}

  /// `image` with its acceptance by its default device, asked with the mutex let go (it may open
  /// the device, or ask the driver of a native binary). Without `mayOpenDevice` it is left
  /// Undecided where deciding would open a device.
  NewImage accept(DeviceImage image, bool mayOpenDevice);
  /// Whether `device` takes `image`, and why not: asked with the mutex let go.
  static Acceptance on(llvm::Expected<backend::Device *> device, const DeviceImage &image);

  /// Image `id`, just added to the table, with what was decided as it was read (accept).
  void arrived(uint32_t id, Acceptance acceptance);
  /// Every loaded image decided again, on other default devices (device_dlattach).
  void undecideAll();
  /// Decides the loaded images left Undecided, with the mutex let go: opening their devices where
  /// needed. Called before anything resolves.
  void decide(LoaderLock &lock);
  /// The same, and then for the images not yet decided at `place` (a view's device): images its
  /// device's backend does not link are as on their default devices.
  void decide(LoaderLock &lock, unsigned place);
  /// Whether image `id` waits to be decided.
  bool undecided(uint32_t id) const { return images_[id].acceptance.candidacy == Candidacy::Undecided; }

 private:
  /// Asks `ask` of the images `ids` with the mutex let go (they are held meanwhile, their host
  /// objects referenced), then hands each still loaded its answer under the mutex (`keep`).
  void decideWithMutexLetGo(LoaderLock &lock, const std::vector<uint32_t> &ids,
                            llvm::function_ref<Acceptance(const DeviceImage &)> ask,
                            llvm::function_ref<void(LoadedImage &, Acceptance)> keep);

  ImageTable &images_;
  backend::Devices &devices_;
  Places &places_;
  std::vector<uint32_t> undecided_;  // loaded images whose candidacy is Undecided
};

}  // namespace devdl
