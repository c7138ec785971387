// What the loader needs of a backend: a device that says which images it can take and links a
// LinkPlan's images into a program, and the program's native kernels and device addresses.
#pragma once

#include "image/aspects.h"
#include "image/device_image.h"

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/Support/Error.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct devdl_native;

namespace devdl::backend {

/// Specialization constants set for an image: SpecId -> value (1, 2, 4 or 8 bytes).
using SpecConstants = std::map<uint32_t, std::string>;

/// One image of a plan, and its label for messages ("app.spv: image 0 (spirv)").
struct LinkInput {
  const DeviceImage *image;
  std::string label;
  const SpecConstants *specConstants = nullptr;  // those set; null or empty for none
  /// Its definitions another image of the plan interposes: the link must see them local to this
  /// image (image/local_definitions.h).
  std::span<const std::string_view> interposed = {};
  /// Its variables, defined or imported, whose one instance on the device lies in another
  /// program: the link reaches each through its cell, the image edited so (editedForLink,
  /// image/instance_cells.h); the program cache sets the cells once the program is made.
  std::span<const std::string_view> elsewhere = {};
  /// Of `interposed`, the variables whose instance, this image's own, lies in another program: the
  /// image's own code reaches each through its interposed cell (interposedCellName, by the
  /// input's position).
  std::span<const std::string_view> interposedElsewhere = {};
  /// The names its statics (image->statics, parallel) are exported under in every program
  /// (staticExportName): the link exports them so (editedForLink), and reaches those in
  /// `elsewhere` through cells as other variables. Empty where it has none.
  std::span<const std::string> statics = {};
};

/// The bytes of `input`'s image as a link takes them, the image at `position` among the link's
/// inputs (editedForLink, image/instance_cells.h). In an image devdl's validator could not vouch
/// for (DeviceImage::unvalidated) definitions are made local by devdl's own reading alone, its
/// statics stay its own, and a variable to reach elsewhere is an error naming it.
llvm::Expected<Bytes> editedForLink(const LinkInput &input, size_t position, std::deque<std::string> &edits);

/// Where a variable of a program lies in device memory: its address and its size in bytes.
struct Extent {
  void *address;
  uint64_t size;
};

/// A linked program. The native objects it hands out live as long as it does. Its lookups may be
/// called from many threads at once.
class Program {
 public:
  virtual ~Program() = default;
  /// The native kernel (cl_kernel, CUfunction), made on first request and kept: one object for
  /// one name, whichever thread asks first.
  virtual llvm::Expected<void *> kernel(std::string_view name) = 0;
  /// Where a variable lies, where the backend has its address; else an error saying why.
  virtual llvm::Expected<Extent> variable(std::string_view name) = 0;
  /// The device address of a function, where the backend has one; else an error saying why.
  virtual llvm::Expected<void *> function(std::string_view name) = 0;
  /// Copies `size` bytes between `host` and the variable `name` from `offset` on: into the
  /// variable with `toDevice`, else out of it. Done when it returns; an error where the bytes are
  /// outside the variable or the backend cannot.
  virtual llvm::Error copyVariable(std::string_view name, size_t offset, void *host, size_t size, bool toDevice) = 0;
};

/// A runtime that loads a program's binary itself, for code of its own that registers with it:
/// the CUDA runtime, given a library's relocatable device code (include/devdl_cuda.h). devdl
/// links the binary as one module with a kernel named `anchor` in it; the runtime loads it and
/// gives the native function of `anchor` in what it loaded (a CUfunction), and devdl looks up the
/// program's kernels and variables in that module, which stays the runtime's.
struct RuntimeLoad {
  std::function<llvm::Expected<void *>(std::string_view binary, const char *anchor)> load;
};

/// A device, once opened, is used from many threads at once: link, load and accepts may be
/// called concurrently (each backend's driver API is thread-safe for them).
class Device {
 public:
  virtual ~Device() = default;
  virtual int backend() const = 0;  // DEVDL_BACKEND_...
  virtual const std::string &name() const = 0;
  /// "OpenCL device NAME": the device as messages name it.
  virtual std::string description() const = 0;
  /// Whether the device has an optional feature (image/aspects.h), as the driver reports it.
  bool hasAspect(uint32_t aspect) const { return aspect < aspects_.size() && aspects_[aspect]; }
  /// Whether the device can take `image` (its format, and its target where it has one): success,
  /// else an Unsupported error saying why ("cubin for sm_80 does not run on ..."). Only such
  /// images are candidates for resolution. Decided from what the image says and its head() alone,
  /// but for native binaries (OpenCL's, Intel's), which only their driver can judge, from their
  /// bytes: other images may come without them (DeviceImage::unread).
  virtual llvm::Error accepts(const DeviceImage &image) const = 0;
  /// Links the images of a plan, in plan order, into one program: the phases every backend
  /// shares first (DriverInputs::prepare: accept, choose, edit), then the driver's own
  /// (docs/architecture.md, "The link pipeline"). Errors name the image and the symbol, and carry
  /// what the driver logged. With `binary`, also the program's native binary, as load() takes it
  /// back (for the disk cache); left empty, saying why under DEVDL_DEBUG=statistics, where the
  /// driver does not give one: the program is not stored.
  virtual llvm::Expected<std::unique_ptr<Program>> link(std::span<const LinkInput> inputs,
                                                        std::string *binary = nullptr) = 0;
  /// A program from a native binary link() gave on this device (same identity()).
  virtual llvm::Expected<std::unique_ptr<Program>> load(std::string_view binary) = 0;
  /// Links as link() does, into one module that a runtime loads (RuntimeLoad): its binary,
  /// unloaded. Unsupported where the backend serves no such runtime.
  virtual llvm::Expected<std::string> linkForRuntime(std::span<const LinkInput> inputs);
  /// A program over what `runtime` loaded of `binary` (linkForRuntime's, or the binary store's
  /// entry of it): its lookups are the runtime's module's, which devdl never unloads.
  virtual llvm::Expected<std::unique_ptr<Program>> loadThrough(std::string_view binary, const RuntimeLoad &runtime);
  /// Everything besides the images that decides what link() makes: backend, device, driver
  /// version, link method, build options, devdl's version. Part of the disk cache's key.
  virtual const std::string &identity() const = 0;
  /// How link() links on this device, for DEVDL_DEBUG: "clLinkProgram", "cuLink".
  virtual std::string_view linkMethod() const = 0;
  /// The native platform, device and context, for device_dlnative.
  virtual void native(devdl_native &out) const = 0;
  /// Whether a binary link() gave here loads on another device of the same identity() in this
  /// process: not where it holds an address of this process's memory that is its program's own.
  virtual bool binaryLoadsOnAnotherDevice() const { return true; }

 protected:
  AspectSet aspects_;  // what the device has, set by each backend from its driver's answers when it opens it
};

/// Success where [offset, offset + size) lies inside the `bytes` of variable `name`, else the
/// error copyVariable gives.
llvm::Error checkInsideVariable(std::string_view name, uint64_t bytes, size_t offset, size_t size);

/// A plan's inputs as a driver is given them, the first phases of every backend's link: each one
/// the device takes (Device::accepts; one of `askedAtLink`, a native binary, is judged by its
/// driver as it is linked), then the image of it the driver is given where the backend chooses
/// one (`choose`: a fat binary's member; an error it gives names the input itself), then each one
/// another image interposes definitions of, or that reaches instances in other programs or exports
/// its statics, edited so (editedForLink) into a copy that lives as long as this object. An error
/// names the input.
class DriverInputs {
 public:
  /// The image of an input the driver is given instead of its own, where there is one.
  using Choose = llvm::function_ref<llvm::Expected<std::optional<DeviceImage>>(const LinkInput &)>;

  DriverInputs() = default;
  DriverInputs(const DriverInputs &) = delete;
  DriverInputs &operator=(const DriverInputs &) = delete;
  llvm::Error prepare(const Device &device, std::span<const LinkInput> given,
                      std::optional<ImageFormat> askedAtLink = std::nullopt, Choose choose = nullptr);

  std::vector<LinkInput> inputs;  // `given`, each image the given one, the one chosen, or its edited copy

 private:
  std::deque<DeviceImage> copies_;
  std::deque<std::string> edits_;
};

/// The device DEVDL_DEVICE names among `names` (a backend's devices, in its order): its index,
/// or the first whose name contains the value; 0 when the variable is unset. `backend` names
/// the backend in errors ("OpenCL").
llvm::Expected<size_t> chooseDevice(const std::vector<std::string> &names, std::string_view backend);

}  // namespace devdl::backend
