// devdl's build as the caches and the tools name it.
#pragma once

#include <string>

namespace devdl {

/// devdl's version and the versions of what it translates with, for Device::identity() and the
/// image summaries: a cached binary or summary is not reused by a devdl that would make another.
std::string devdlBuild();

}  // namespace devdl
