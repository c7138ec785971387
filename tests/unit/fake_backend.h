// A test double of a backend, for the loader's unit tests: it runs no device code. It takes
// SPIR-V images, records every link it is asked for, and links as a linker would check the
// inputs: each import must be defined by exactly one input, nothing defined twice (a name an
// input is to have local does not count as its definition). Its programs
// hand out a distinct non-null pointer for each kernel, variable and function they define, and
// keep 8 bytes for each variable, which the host writes and reads. A program for a runtime
// (backend::RuntimeLoad) is linked the same way; its "binary" names it.
#pragma once

#include "backend/registry.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace devdl::test::fake {

inline constexpr int kBackendNumber = 100;
inline constexpr int kCubinBackendNumber = 102;  // backendsWithCubins()' second row

/// The platform that makes a device attached (device_dlattach, device_dlview) a GPU ("fake GPU":
/// the aspects gpu and fp64); any other, a CPU as the default device is.
inline void *const kGpu = reinterpret_cast<void *>(uintptr_t{0x6770});

/// One link the fake device was asked for: the labels of its inputs, in plan order, the names
/// each input was to have local (interposed by another input), and the specialization constants
/// set for each.
struct Link {
  std::vector<std::string> inputs;
  std::vector<std::vector<std::string>> interposed;
  std::vector<backend::SpecConstants> specConstants;
  /// By input: the variables it reaches in another program, through cells named instanceCellName,
  /// and "NAME (interposed)" for those its own code reaches through interposedCellName.
  std::vector<std::vector<std::string>> elsewhere;
  /// What the program's variables hold, by name, as copyVariable wrote them (8 bytes each, zero
  /// at first): the cells the loader sets among them. Shared with the program.
  std::shared_ptr<std::map<std::string, uint64_t, std::less<>>> values;
  /// Linked for a runtime that loads it (linkForRuntime): its binary names the program, which
  /// loadThrough hands out once the runtime's load says it loaded it.
  bool forRuntime = false;
};

/// Every link made by fake devices since the last reset, in order. Guarded by linksMutex().
std::vector<Link> &links();
std::mutex &linksMutex();

/// Called in each link, after it is recorded and before it returns (on the linking thread, with
/// no loader lock held): tests hold a link there to see what other threads do meanwhile.
void setLinkHook(std::function<void(const Link &)> hook);

/// Called each time a device of the fake or the absent backend is opened, before it opens or
/// fails (on the opening thread, with no loader lock held): tests count opens, and hold one there.
void setOpenHook(std::function<void()> hook);

/// The table with the fake backend as its only row (name "fake", SPIR-V).
std::span<const backend::BackendEntry> backends();

/// Two rows that take SPIR-V: first "absent" (number 101), whose device never opens ("no
/// absent device here"), then the fake backend.
std::span<const backend::BackendEntry> backendsWithAnAbsentOneFirst();

/// The fake backend, then "fake-cubin" (number 102): a device that takes cubins alone (CUDA's
/// family), opened and attached as the fake one is.
std::span<const backend::BackendEntry> backendsWithCubins();

}  // namespace devdl::test::fake
