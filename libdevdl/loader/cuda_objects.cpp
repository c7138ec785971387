// A host object's nvcc -rdc=true objects, linked at load time for the CUDA runtime
// (include/devdl_cuda.h): devdl does what nvcc -dlink does, against the device code already in
// the process, and the runtime loads the result; devdl's lookups use the module the runtime
// loaded, so that both reach the same instances.
#include "host/preloads.h"
#include "image/read_image.h"
#include "loader/loader.h"
#include "support/debug.h"
#include "support/error.h"

#include "devdl_cuda.h"

#include <llvm/ADT/STLExtras.h>

namespace devdl {

llvm::Error Loader::registerCuda(devdl_cuda_objects &objects, bool &withProgram) {
  // Called from the host object's constructors: the objects loaded after it are initialized after.
  // Tools preloaded into the program are initialized before devdl starts CUDA (the driver, to
  // link; the runtime, to load), before the lock is taken: their constructors may call devdl.
  host::initializePreloadedTools();
  host::InConstructor constructor;
  LoaderLock lock(parts_.mutex);
  parts_.scan.scan(lock);
  std::optional<ProcessScan::CudaObjects> found = parts_.scan.cudaObjectsAt(objects.within);
  if (!found) return fail(ErrorCode::NotFound, "no loaded object holds the CUDA objects registering");
  const std::string object = found->object.empty() ? "the executable" : found->object;
  withProgram = found->withProgram;
  if (found->images.empty()) {
    // The scan passes over what it cannot read: read again, for why.
    lock.letGo();
    auto images = readCudaObjectImagesOfFile(found->object.empty() ? "/proc/self/exe" : found->object);
    lock.takeAgain();
    if (!images) return images.takeError();
    return fail(ErrorCode::NotFound, object + ": no relocatable device code was found in its file (an __nv_relfatbin "
                                              "section, which nvcc -rdc=true puts in each object)");
  }
  // Without a driver or device there is nothing to link for: said so, rather than as the symbols
  // other libraries' programs then lack (and not as a lookup error, which would end the program).
  lock.letGo();
  auto device = parts_.devices.device(DEVDL_BACKEND_CUDA);
  lock.takeAgain();
  if (!device) return inFile(device.takeError(), object);
  if (Debug::get().on(Debug::Libs))
    Debug::get().print("the CUDA objects of " + object + " (" + std::to_string(found->images.size()) +
                       " images): linked for the CUDA runtime");
  backend::RuntimeLoad runtime{[&](std::string_view binary, const char *anchor) -> llvm::Expected<void *> {
    if (void *function = objects.load(objects.context, binary.data(), binary.size(), anchor)) return function;
    return fail(ErrorCode::Unsupported, object + ": the CUDA runtime did not load the linked device code (kernel `" +
                                            llvm::Twine(anchor) + "` not found in what it registered)");
  }};
  auto program = parts_.programs.programForRuntime(lock, found->images, object, runtime);
  if (!program) return program.takeError();
  cudaRegistered_.emplace_back(&objects, *program);
  return llvm::Error::success();
}

void Loader::unregisterCuda(const devdl_cuda_objects &objects) {
  LoaderLock lock(parts_.mutex);
  auto it = llvm::find_if(cudaRegistered_, [&](const auto &entry) { return entry.first == &objects; });
  if (it == cudaRegistered_.end()) return;
  parts_.programs.release(it->second);
  cudaRegistered_.erase(it);
}

}  // namespace devdl
