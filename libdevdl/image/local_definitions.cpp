#include "image/local_definitions.h"
#include "image/readers.h"
#include "support/error.h"

namespace devdl {

llvm::Expected<std::string> withLocalDefinitions(Bytes bytes, ImageFormat format,
                                                 std::span<const std::string_view> names) {
  switch (format) {
    case ImageFormat::SpirV: return readers::spirvWithLocalDefinitions(bytes, names);
    case ImageFormat::Cubin:
    case ImageFormat::DeviceElf: return readers::elfWithLocalDefinitions(bytes, names);
    case ImageFormat::Ptx: return readers::ptxWithLocalDefinitions(bytes, names);
    default: break;
  }
  return fail(ErrorCode::Unsupported, "cannot make `" + std::string(names.empty() ? "" : names.front()) +
                                          "` local in an image of format " + std::string(formatName(format)) +
                                          ": another image's definition is the one used");
}

}  // namespace devdl
