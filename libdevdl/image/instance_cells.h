// One instance of a loaded image's variables on each device, as ld.so maps a library's data once:
// a program linked after the instance of a variable exists elsewhere (in another program on the
// same device) reaches it through a cell, a variable of its own that holds the instance's address,
// which the loader sets once the program is made. The image's code and that of the images that
// import the variable read the cell once in each function that uses the variable, then use the
// instance through the pointer.
#pragma once

#include "image/device_image.h"

#include <llvm/Support/Error.h>

#include <deque>
#include <span>
#include <string>
#include <string_view>

namespace devdl {

/// What the name of every cell starts with.
inline constexpr std::string_view kInstanceCellPrefix = "__devdl_instance_";

/// What the name a static is exported under starts with.
inline constexpr std::string_view kStaticPrefix = "__devdl_static_";

/// The name under which an image's static `name` (DeviceImage::statics) is exported by every
/// program linked with the image, so that the one instance a program holds can be reached in
/// the others as an exported variable's is: apart from every other image's by the hash of the
/// image's bytes.
std::string staticExportName(std::string_view name, uint64_t imageHash);
/// A copy of an image's bytes (of `format`) with its statics `names` exported under `exported`
/// (parallel): SPIR-V and PTX; other formats' bytes unchanged (a cubin's statics stay its own).
/// Fails with BadFormat where the bytes do not parse or have no such static.
llvm::Expected<std::string> withStaticsExported(Bytes bytes, ImageFormat format, std::span<const std::string_view> names,
                                                std::span<const std::string> exported);

/// The name of the cell that holds the address of variable `name`'s instance: exported by the
/// image that defined the variable, imported by those that imported it.
std::string instanceCellName(std::string_view name);
/// The cell through which an image's own code reaches its variable `name` where another image of
/// the program interposes the name (the image's own accesses keep its own variable, as
/// -Bsymbolic): apart from the program's cell of the name, by the image's `position` among the
/// program's inputs.
std::string interposedCellName(std::string_view name, size_t position);

/// A copy of an image's bytes (of `format`) in which each of `names` it defines or imports is
/// reached through its cell: the definition (its initializer left to the instance) and the
/// import become the cell's, exported and imported under instanceCellName, and every use in a
/// function goes through the address the cell holds. `cells` names each one's cell, where not
/// instanceCellName. SPIR-V and PTX. Fails with Unsupported
/// naming the variable where a format or a use cannot be rewritten (a constant holding its
/// address, 32-bit addressing, PTX's constant bank), and with BadFormat where the bytes do not
/// parse.
llvm::Expected<std::string> withInstancesElsewhere(Bytes bytes, ImageFormat format,
                                                   std::span<const std::string_view> names,
                                                   std::span<const std::string> cells = {});

/// An image's bytes as a link takes them, the image at `position` among the link's inputs: its
/// `statics` exported under `exported` (SPIR-V and PTX; none where `exported` is empty), then
/// `elsewhere` reached through their cells, and `interposedElsewhere` (of `interposed`) through their
/// interposed cells, then its definitions of `interposed` made local (image/local_definitions.h);
/// `bytes` themselves where nothing is to be edited. The copies made are kept in `edits`.
llvm::Expected<Bytes> editedForLink(Bytes bytes, ImageFormat format, std::span<const std::string_view> statics,
                                    std::span<const std::string> exported, std::span<const std::string_view> interposed,
                                    std::span<const std::string_view> elsewhere,
                                    std::span<const std::string_view> interposedElsewhere, size_t position,
                                    std::deque<std::string> &edits);

}  // namespace devdl
