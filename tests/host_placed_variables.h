// The tests' drivers (test doubles over PoCL: tests/level_zero_driver, tests/opencl_layer) keep a
// program's variables as a device keeps them, one instance for all its kernels, in the region of
// host memory devdl's OpenCL backend places them in on PoCL (backend/opencl/host_variables.h):
// PoCL 3.1 gives each kernel a copy of its own.
#pragma once

#include "backend/opencl/host_variables.h"
#include "backend/spirv/place_variables.h"

#include <llvm/Support/Error.h>

#include <cstdint>
#include <memory>
#include <utility>

namespace devdl::test {

using backend::opencl::HostVariables;

/// A PlaceVariables for spirvToSpir that keeps the region it places in `held`.
inline auto placeInto(std::unique_ptr<HostVariables> &held) {
  return [&held](const backend::VariableLayout &layout) -> llvm::Expected<uint64_t> {
    auto region = HostVariables::place(layout, 0);
    if (!region) return region.takeError();
    held = std::move(*region);
    return held->address();
  };
}

}  // namespace devdl::test
