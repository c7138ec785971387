// The loader: handles, reference counts and flags, the global scope in the host loader's order,
// resolution of imports over the scopes, and programs built through the backend.
//
// Global scope, in search order: the device images carried by the objects of the running
// process that are in the host's global scope (link-map order: executable, LD_PRELOAD, libraries
// in load order, later RTLD_GLOBAL objects), then the images of handles opened DEVDL_GLOBAL, in
// the order they joined. A handle's local scope is its own images.
#pragma once

#include "backend/backend.h"
#include "image/read_image.h"
#include "resolve/link_plan.h"
#include "resolve/symbol_index.h"

#include <llvm/Support/Error.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <sys/types.h>
#include <vector>

struct devdl_native;
struct devdl_symbol_info;

namespace devdl {

class Handle;

/// XXH3-128 of an image's bytes: programs are keyed by what they are made of.
struct ContentHash {
  uint64_t low = 0, high = 0;
  auto operator<=>(const ContentHash &) const = default;
};

/// One image known to the loader, with where it came from.
struct LoadedImage {
  DeviceImage image;
  std::string label;      // "app.spv: image 0 (spirv)"
  std::string file;       // the file or memory name; "" for the executable
  unsigned index;         // the image's position in it
  Handle *owner;          // the handle it was opened with; null for the process's own images
  bool global;            // in the global scope
  ContentHash bytesHash;  // of the bytes alone
  ContentHash hash;       // of the bytes and the specialization constants set: what programs are keyed by
  backend::SpecConstants specConstants;
  // Whether the device takes it, once asked: lookups ask on every call.
  enum class Candidacy : uint8_t { Unknown, Yes, No } candidacy = Candidacy::Unknown;
};

/// A program linked from a link plan, with the loaded images that import from it (importersOf).
struct LinkedProgram {
  std::vector<ContentHash> key;  // the hashes of its images, sorted
  // The plans (image ids) it was linked or reused for; a plan goes when one of its images is
  // unloaded, the program with the last plan.
  std::vector<std::vector<uint32_t>> plans;
  backend::Device *device;
  std::unique_ptr<backend::Program> program;

  bool holds(uint32_t image) const {
    return std::any_of(plans.begin(), plans.end(),
                       [&](const auto &plan) { return std::find(plan.begin(), plan.end(), image) != plan.end(); });
  }
};

class Handle {
 public:
  /// What makes a second open the same: the file, or the memory.
  struct Identity {
    dev_t device;
    ino_t inode;
    const void *memory;
    bool operator==(const Identity &) const = default;
  };
  std::string path;  // the file, or the name given with the memory
  Identity identity{};
  unsigned references = 0;
  bool global = false;
  bool nodelete = false;
  bool deepbind = false;
  bool linkedNow = false;  // its kernels' programs were linked (DEVDL_NOW)
  std::vector<uint32_t> images;  // ids, in file order
  SymbolIndex local;
};

class Loader {
 public:
  static Loader &instance();

  llvm::Expected<void *> open(const char *path, int flags);
  llvm::Expected<void *> openMemory(const void *data, size_t size, const char *name, int flags);
  llvm::Expected<void *> symbol(void *handle, std::string_view name);
  llvm::Error close(void *handle);
  llvm::Error native(devdl_native &out);
  llvm::Error attach(const devdl_native &native);
  llvm::Error specialize(void *handle, unsigned specId, std::string_view value);
  llvm::Error symbolInfo(void *handle, std::string_view name, devdl_symbol_info &out);
  llvm::Expected<std::string> planText(void *handle, std::string_view name);

  /// One image as device_dliterate reports it: copied, so callbacks run without the lock.
  struct ImageSnapshot {
    std::string file;
    unsigned index;
    std::string format, target;
    bool global;
    size_t symbols;
  };
  std::vector<ImageSnapshot> snapshot();

 private:
  // All private members are called with mutex_ held.
  Handle *globalHandle() { return reinterpret_cast<Handle *>(&globalScopeTag_); }
  llvm::Error scanProcess();
  llvm::Expected<const Definition *> lookup(void *handle, std::string_view name);
  void loadPreloads();
  llvm::Expected<Handle *> openFile(const std::string &file, int flags);
  llvm::Expected<Handle *> openMemory(Bytes bytes, std::string name, int flags);
  /// The handle already open for `identity`, referenced once more; null when there is none.
  llvm::Expected<Handle *> reopen(const Handle::Identity &identity, int flags);
  /// Links the programs of the handle's kernels (DEVDL_NOW).
  llvm::Error linkNow(Handle &handle);
  llvm::Expected<Handle *> addHandle(ImageFile read, const Handle::Identity &identity, int flags);
  void rebuildGlobalIndex();
  uint32_t addImage(DeviceImage image, const std::string &file, unsigned index, Handle *owner);
  bool candidate(const Definition &d);
  /// The first definition the device can link, of `family` (None: of any family).
  const Definition *firstCandidate(std::span<const Definition> definitions, LinkFamily family = LinkFamily::None);
  std::optional<uint32_t> resolve(std::string_view symbol, uint32_t importer);
  llvm::Expected<LinkedProgram *> programFor(uint32_t root);
  /// The loaded images that import, directly or through others, from `plan`'s images, bind to
  /// them, go to `dev` and resolve completely: linked with the plan, a library's code is built
  /// once whichever kernel is asked for first. With the plan of each, in `plans`.
  std::vector<uint32_t> importersOf(const LinkPlan &plan, backend::Device *dev,
                                    std::vector<std::vector<uint32_t>> &plans);
  /// The program of `inputs` from the disk cache (`cached`), else linked and stored there.
  llvm::Expected<std::unique_ptr<backend::Program>> buildProgram(backend::Device &dev, const std::vector<ContentHash> &key,
                                                                 std::span<const backend::LinkInput> inputs,
                                                                 bool &cached);
  /// Why `image` is no candidate: no device for its family, or the device does not take it.
  std::string whyNotCandidate(const DeviceImage &image);
  /// " (lib.bc: image 0 (spir-bc) defines it, but ...)" for an import that a definition the
  /// device cannot take would have resolved; "" otherwise.
  std::string whyUnresolved(std::string_view symbol, uint32_t importer);
  /// The device that links `image`'s family, opened on first use; null with the reason when
  /// there is none (no driver, or DEVDL_BACKEND chose another backend).
  backend::Device *deviceFor(const DeviceImage &image, std::string *why = nullptr);
  /// The device of a backend (DEVDL_BACKEND_...), opened on first use.
  llvm::Expected<backend::Device *> device(int backend);
  /// DEVDL_BACKEND, read on first use; "" for every backend.
  static const std::string &backendChoice();
  void joinGlobalScope(const std::vector<uint32_t> &ids);
  /// DEVDL_DEBUG=symbols: the definitions in `ids` that an earlier one in the global scope hides.
  void reportDuplicates(const std::vector<uint32_t> &ids);
  void dropImages(const std::vector<uint32_t> &ids);

  std::mutex mutex_;
  char globalScopeTag_ = 0;  // its address is the handle of device_dlopen(NULL)
  std::vector<std::unique_ptr<LoadedImage>> images_;  // by id; null once unloaded
  std::vector<const DeviceImage *> imagePointers_;    // images_[id]->image, for link plans
  std::vector<uint32_t> freeIds_;                     // of unloaded images, to be taken again
  std::map<std::string, std::vector<uint32_t>, std::less<>> importers_;  // symbol -> images importing it
  std::vector<uint32_t> globalOrder_;                // ids in global search order
  SymbolIndex global_;
  std::vector<std::unique_ptr<Handle>> handles_;
  // A loaded host object's bundle, by its address in memory.
  struct ProcessBundle {
    std::string symbol;  // devdl-pack's symbol for it: found by dlsym(RTLD_DEFAULT) when global
    std::string object;  // its path as the host loader reports it
    bool main = false;   // the executable: global whatever its dynamic symbol table says
    bool global = false;
    std::vector<uint32_t> images;
  };
  std::map<const uint8_t *, ProcessBundle> processBundles_;
  uint64_t scannedGeneration_ = ~uint64_t(0);
  bool preloaded_ = false;
  // Each backend's device, by DEVDL_BACKEND_... number, or why it has none.
  struct BackendSlot {
    bool tried = false;
    std::unique_ptr<backend::Device> device;
    std::string error;
  };
  BackendSlot backends_[4];
  std::vector<std::unique_ptr<LinkedProgram>> programs_;
  // The program each root image was linked into, while the scopes stay as they were.
  std::map<uint32_t, LinkedProgram *> programOfRoot_;
};

}  // namespace devdl
