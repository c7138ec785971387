// Interposition by symbol needs the link to see one definition of each name: the losing images'
// definitions are made local to their image, in a copy of its bytes handed to the linker.
#pragma once

#include "image/device_image.h"

#include <llvm/Support/Error.h>

#include <span>
#include <string>
#include <string_view>

namespace devdl {

/// A copy of an image's bytes (of `format`) in which its definitions of `names` are local: a link
/// sees only the other images' definitions of those names, while the image's own references keep
/// its own (as if it were linked -Bsymbolic). SPIR-V: their Export linkage decoration removed;
/// cubin: their ELF symbols made local, in place; PTX: their .visible or .weak dropped. Fails for
/// a format it cannot edit (a native OpenCL binary, SPIR bitcode), and with BadFormat where the
/// bytes do not parse.
llvm::Expected<std::string> withLocalDefinitions(Bytes bytes, ImageFormat format,
                                                 std::span<const std::string_view> names);

}  // namespace devdl
