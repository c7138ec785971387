// The host-memory regions of programs the driver still holds when devdl lets them go: their
// kernels run with the region's address built in, so a region stays mapped until the driver lets
// its program go too.
#pragma once

#include "backend/opencl/host_variables.h"
#include "backend/opencl/opencl_api.h"

#include <memory>

namespace devdl::backend::opencl {

/// Whether anything but devdl holds `program` (its reference count is above one, or unknown).
bool heldByOthers(const Api &api, cl_program program);
/// Keeps `program`, with devdl's reference on it, and its `variables` until the driver lets it go.
void keepWhileHeld(cl_program program, std::unique_ptr<HostVariables> variables);
/// Unmaps the kept regions whose programs only devdl holds now.
void sweepKept(const Api &api);

}  // namespace devdl::backend::opencl
