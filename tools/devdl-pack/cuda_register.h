// devdl-pack --cuda-register: the registration object that links nvcc -rdc=true objects' device
// code at load time (include/devdl_cuda.h), where nvcc -dlink links it at build time.
#pragma once

#include <string>
#include <vector>

namespace devdl::pack {

/// `devdl-pack --cuda-register [--cc COMPILER] -o FILE OBJ...`: the arguments after
/// --cuda-register. Returns the tool's exit status.
int cudaRegister(const std::vector<std::string> &args);

}  // namespace devdl::pack
