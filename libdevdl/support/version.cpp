#include "support/version.h"

#include "devdl.h"

#include <llvm/Config/llvm-config.h>

namespace devdl {

std::string devdlBuild() {
  return "devdl " + std::to_string(DEVDL_VERSION_MAJOR) + "." + std::to_string(DEVDL_VERSION_MINOR) + "." +
         std::to_string(DEVDL_VERSION_PATCH) + ", LLVM " LLVM_VERSION_STRING;
}

}  // namespace devdl
