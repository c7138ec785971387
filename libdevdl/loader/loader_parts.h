// The loader's parts (docs/architecture.md draws them), each made from those before it, with the
// one mutex that guards their data: what the entry points (loader/loader.h) work over.
//
//   loader/handles        handles, references and flags, scopes joined, views; an open's record
//   loader/global_scope   the global scope joined and left, and what a join hides
//   loader/opener         an open: read with the mutex let go, added as one, DEVDL_NOW
//   loader/reading        what an open reads: a file and the files its images need
//   loader/process_scan   the host's objects and DEVDL_PRELOAD applied
//   loader/candidacies    whether each image's device takes it
//   loader/programs       a kernel's program: planned, found in memory or built, kept, dropped
//   loader/lookups        what a name is bound to in a handle's scope, and its program
//   loader/places         the devices a lookup links for (views' devices)
#pragma once

#include "backend/registry.h"
#include "store/disk_cache.h"
#include "loader/candidacies.h"
#include "loader/global_scope.h"
#include "loader/handles.h"
#include "loader/image_table.h"
#include "loader/loader_lock.h"
#include "loader/lookups.h"
#include "loader/opener.h"
#include "loader/places.h"
#include "loader/process_scan.h"
#include "loader/programs.h"
#include "loader/reading.h"
#include "resolve/scopes.h"

#include <chrono>
#include <span>
#include <string>

namespace devdl {

/// What a loader links with: its backends, the binary store behind its programs (asked for at
/// the first build), and DEVDL_BACKEND's value ("" for every backend).
struct LoaderOptions {
  std::span<const backend::BackendEntry> backends;
  store::BinaryStore &(*store)();
  std::string backendChoice;
  /// How long a thread that may hold the host loader's lock waits for another's work it needs
  /// (a device opened, a program built) before it does that work itself: the other thread may
  /// wait for that lock (support/waiting.h). One shown not to hold it waits as long as it takes.
  std::chrono::milliseconds hostLockWait{1000};
  /// The disk cache that keeps image files' summaries (store/image_summary.h); none where null.
  store::DiskCache &(*summaries)() = nullptr;
};

/// The parts, in the order each is made from those before it.
struct LoaderParts {
  explicit LoaderParts(LoaderOptions options);
  LoaderParts(const LoaderParts &) = delete;
  LoaderParts &operator=(const LoaderParts &) = delete;

  LoaderMutex mutex;
  ImageTable images;
  Scopes scopes;
  backend::Devices devices;
  Places places;
  Candidacies candidacies;
  GlobalScope globalScope;
  Programs programs;
  Handles handles;
  FileReader reader;
  Opener opener;
  ProcessScan scan;
  Lookups lookups;
};

}  // namespace devdl
