// Images as devdl's bundle entries and back (docs/bundle-format.md): internal to libdevdl/image;
// callers use readBundleImages and packImages (read_image.h).
#pragma once

#include "bundle/offload_binary.h"
#include "image/device_image.h"

#include <llvm/Support/Error.h>

#include <deque>
#include <memory>
#include <string>

namespace devdl {

/// The image an entry holds: as devdl recorded it (its format, target, symbols and property sets
/// from the entry's strings), or, in an envelope devdl did not write, as its bytes say.
llvm::Expected<DeviceImage> imageOfEntry(const bundle::Entry &entry, std::shared_ptr<Storage> storage);

/// The entry that records `image`; its strings point into `owned`, which must outlive it.
bundle::Entry entryOfImage(const DeviceImage &image, std::deque<std::string> &owned);

}  // namespace devdl
