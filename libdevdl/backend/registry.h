// The backends devdl links through, as a table: a row names a backend, says which image families
// it takes and how to open its default device or attach to the program's own. The loader picks a
// device by capability and DEVDL_BACKEND, never by a switch over vendors: adding a backend is its
// folder under backend/ and one row.
#pragma once

#include "backend/backend.h"

#include <llvm/Support/Error.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct devdl_native;

namespace devdl::backend {

/// One row of the table.
struct BackendEntry {
  int number;                   // DEVDL_BACKEND_...
  std::string_view name;        // as DEVDL_BACKEND names it
  std::string_view alias;       // another spelling DEVDL_BACKEND takes ("" for none)
  std::span<const LinkFamily> families;  // the image families it links; empty: not in this build
  /// The device DEVDL_DEVICE names, else the backend's first; null when not in this build.
  llvm::Expected<std::unique_ptr<Device>> (*openDefault)();
  /// The program's own device and context (device_dlattach); null when not in this build.
  llvm::Expected<std::unique_ptr<Device>> (*attach)(const devdl_native &native);
};

/// The backends of this build, in the order they are preferred for a family: OpenCL, CUDA, Level
/// Zero (SPIR-V goes to Level Zero where DEVDL_BACKEND says so, or OpenCL has no device).
std::span<const BackendEntry> builtinBackends();

/// The devices devdl links for, one per backend, each opened on first use; and which device links
/// an image family. Thread-safe. A backend's device is opened by one thread, and others asking
/// meanwhile wait for it and get what it got (support/waiting.h; docs/architecture.md, "Threads").
/// A device, once published, lives as long as this object (programs refer to it).
class Devices {
 public:
  /// `table` outlives this object; `choice` is DEVDL_BACKEND's value ("" for every backend).
  Devices(std::span<const BackendEntry> table, std::string choice,
          std::chrono::milliseconds hostLockWait = std::chrono::seconds(1));
  ~Devices();
  Devices(const Devices &) = delete;
  Devices &operator=(const Devices &) = delete;

  /// The device that links `image`: that of the first backend taking its family that DEVDL_BACKEND
  /// allows (a device the program attached to, whatever it says) and that has a device. Fails
  /// (Unsupported) when there is none, with the first such backend's reason.
  llvm::Expected<Device *> forImage(const DeviceImage &image);
  /// The device of backend `number`, opened on first use. Fails for a backend DEVDL_BACKEND
  /// turned off or names wrongly, one not in this build, or one without a device.
  llvm::Expected<Device *> device(int number);
  /// The device in use on backend `number`, not opening one; null when none is.
  Device *opened(int number) const;
  /// Whether forImage(image) would open no device: each backend it would try has been opened
  /// (or failed to) already. Opening one loads a driver, which a caller inside the host loader's
  /// lock (a host constructor) should not do unless it must.
  bool opensNothingFor(const DeviceImage &image) const;
  /// The backend device_dlnative(0) means: the one DEVDL_BACKEND names, else one in use, else the
  /// first with a device, else the first of the table (for its error).
  int defaultBackend();
  /// Makes `device` the device of its backend (device_dlattach). The one it replaces stays alive
  /// with this object.
  void replace(std::unique_ptr<Device> device);
  /// The device `native` names, for a view of a handle (device_dlview): its backend's default
  /// device where it is that one (the same context, or none given), else the one found for the
  /// same device and context before, else attached now (no context given: devdl's own on that
  /// device). Opening one calls the driver: never with the loader's lock held.
  llvm::Expected<Device *> forNative(const devdl_native &native);
  /// Whether `device`'s backend links images of `family`.
  bool links(const Device &device, LinkFamily family) const;
  /// The device as messages name it: its name, and where another device in use has the same
  /// name, its place among them ("pthread-cpu #2").
  std::string label(const Device *device) const;
  /// Whether another device in use is of `device`'s model (the same identity()) and a program's
  /// binary linked for one loads on the other (Device::binaryLoadsOnAnotherDevice).
  bool modelShared(const Device &device) const;

  /// The row of backend `number`, or null.
  const BackendEntry *entry(int number) const;
  /// "opencl, cuda and level_zero", for messages; only those in this build with `inBuild`.
  std::string names(bool inBuild = false) const;

 private:
  // What opening a backend's device gave: the device, or why there is none.
  struct Opened {
    std::unique_ptr<Device> device;
    std::string error;
  };
  /// Publishes `opened` as the slot's if none is yet (any with `force`); the one published.
  const Opened *publish(size_t slot, std::unique_ptr<Opened> opened, bool force);
  /// The slot's device opened by this thread, or by the one opening it now.
  const Opened *open(size_t slot, const BackendEntry &row);
  size_t slotOf(int number) const;
  /// Every device handed out: the backends' opened, then views' in the order they came.
  std::vector<const Device *> inUse() const;

  std::span<const BackendEntry> table_;
  std::string choice_;
  const BackendEntry *chosen_;  // the row choice_ names; null for none (every row, or no such row)
  std::unique_ptr<std::atomic<const Opened *>[]> slots_;  // parallel to table_
  mutable std::mutex published_;                         // guards kept_, opening_, named_ and used_
  std::condition_variable done_;                         // a device was opened, or failed to
  std::vector<bool> opening_;                            // parallel to table_: a thread opens it now
  std::chrono::milliseconds hostLockWait_;
  std::vector<std::unique_ptr<Opened>> kept_;            // everything ever published
  // The devices of views, with the native device and context they were asked for (null: devdl's
  // own); guarded by published_, never removed.
  struct Named {
    int backend;
    void *device, *context;
    std::unique_ptr<Device> opened;
  };
  std::vector<Named> named_;
  std::vector<const Device *> used_;  // every device handed out, in that order: for label()
};

}  // namespace devdl::backend
