// An image's part in SYCL's virtual functions (seed 003): the `SYCL/virtual functions` property
// set. An image holding a set's functions names the set (and whether it is the set's dummy,
// its functions emptied, for devices that lack the set's aspects); an image whose kernels call
// or create objects of sets names them. The loader links a kernel's program with the images of
// the sets its images call or create (loader/link.cpp).
#pragma once

#include "image/device_image.h"

#include <string_view>
#include <vector>

namespace devdl {

struct VirtualFunctions {
  std::string_view set;  // virtual-functions-set: the set whose functions the image holds
  bool dummy = false;    // dummy-image=1
  std::vector<std::string_view> calls;    // calls-virtual-functions-set
  std::vector<std::string_view> creates;  // creates-virtual-functions-set

  bool any() const { return !set.empty() || !calls.empty() || !creates.empty(); }
};

/// What `image`'s properties say; empty where it has none. The views are into the image's strings.
VirtualFunctions virtualFunctionsOf(const DeviceImage &image);

}  // namespace devdl
