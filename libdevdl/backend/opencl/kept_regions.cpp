// Kept regions: a program's variables in host memory outlive devdl's use of the program while
// the driver holds it.
#include "backend/opencl/kept_regions.h"

#include <llvm/ADT/STLExtras.h>

#include <mutex>
#include <vector>

namespace devdl::backend::opencl {

namespace {

// The regions of programs the driver still held when devdl let them go: a command of one of their
// kernels not yet retired, a kernel the user made of them (each holds a reference on the program,
// and PoCL has no program release callback). Each is kept, with devdl's reference on its
// program, until the driver lets the program go too: its kernels run with the region's address
// built in. Never destroyed: kernels may still run at exit.
struct Kept {
  cl_program program;
  std::unique_ptr<HostVariables> variables;
};
std::mutex keptLock;
std::vector<Kept> &kept() {
  static auto *regions = new std::vector<Kept>;
  return *regions;
}

}  // namespace

bool heldByOthers(const Api &api, cl_program program) {
  cl_uint references = 0;
  return api.clGetProgramInfo(program, CL_PROGRAM_REFERENCE_COUNT, sizeof references, &references, nullptr) !=
             CL_SUCCESS ||
         references > 1;
}

void keepWhileHeld(cl_program program, std::unique_ptr<HostVariables> variables) {
  std::lock_guard hold(keptLock);
  kept().push_back({program, std::move(variables)});
}

void sweepKept(const Api &api) {
  std::lock_guard hold(keptLock);
  llvm::erase_if(kept(), [&](Kept &region) {
    if (heldByOthers(api, region.program)) return false;
    api.clReleaseProgram(region.program);
    return true;
  });
}

}  // namespace devdl::backend::opencl
