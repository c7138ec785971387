// The directory of the file that holds devdl's code (libdevdl.so, or a program linked with devdl
// itself), as ld.so finds what belongs to it from its own file: where devdl's translator helper
// and the installed device libraries are.
#pragma once

#include <string>

namespace devdl {

/// The directory, with no slash at its end; "." where the file cannot be told.
std::string ownDirectory();

}  // namespace devdl
