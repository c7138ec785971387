// The devices a lookup links for, by place: place 0 the default devices (each image family's
// backend's own), then the devices of views (device_dlview) in the order they were first asked
// for. Images keep their candidacy and programs by place.
#pragma once

#include "backend/registry.h"
#include "image/device_image.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/Support/Error.h>

#include <vector>

namespace devdl {

class Places {
 public:
  explicit Places(backend::Devices &devices) : devices_(devices) {}

  /// The place whose device links `image` for a lookup at `place`: `place` where its device's
  /// backend links the image's family, else 0 (its default device).
  unsigned placeFor(const DeviceImage &image, unsigned place) const {
    return place && devices_.links(*places_[place], linkFamily(image.format)) ? place : 0;
  }
  /// The device that links `image` at `place` (placeFor): a view's, or its default device,
  /// opened where it is not yet.
  llvm::Expected<backend::Device *> deviceAt(const DeviceImage &image, unsigned place) {
    if (unsigned at = placeFor(image, place)) return places_[at];
    return devices_.forImage(image);
  }
  /// A view's device's place, made for it where it has none. Never removed.
  unsigned placeOf(backend::Device *device) {
    auto at = llvm::find(places_, device);
    if (at != places_.end()) return static_cast<unsigned>(at - places_.begin());
    places_.push_back(device);
    return static_cast<unsigned>(places_.size() - 1);
  }
  /// A view's device (place > 0).
  backend::Device *operator[](unsigned place) const { return places_[place]; }

 private:
  backend::Devices &devices_;
  std::vector<backend::Device *> places_{nullptr};  // place 0's are the default devices: none here
};

}  // namespace devdl
