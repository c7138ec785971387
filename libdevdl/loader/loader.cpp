#include "loader/loader.h"
#include "support/debug.h"

#include "backend/cuda/cuda_device.h"
#include "backend/opencl/opencl_device.h"
#include "bundle/host_elf.h"
#include "cache/disk_cache.h"
#include "support/error.h"
#include "support/xxh3.h"

#include "devdl.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/ScopeExit.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/FormatVariadic.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/auxv.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>

namespace devdl {

namespace {

// A name without a slash is looked up in DEVDL_LIBRARY_PATH, then taken as it is. Like
// LD_LIBRARY_PATH, the variable is ignored in secure-execution (setuid) processes.
std::string findFile(const char *path) {
  if (std::strchr(path, '/')) return path;
  const char *list = getauxval(AT_SECURE) ? nullptr : std::getenv("DEVDL_LIBRARY_PATH");
  for (llvm::StringRef rest = list ? list : ""; !rest.empty();) {
    auto [dir, tail] = rest.split(':');
    rest = tail;
    if (dir.empty()) continue;
    std::string candidate = dir.str() + "/" + path;
    if (access(candidate.c_str(), R_OK) == 0) return candidate;
  }
  return path;
}

// The items of a list separated by spaces or colons, as LD_PRELOAD's.
std::vector<std::string> preloadList(const char *list) {
  std::vector<std::string> items;
  llvm::SmallVector<llvm::StringRef, 8> parts;
  llvm::SplitString(list ? list : "", parts, " :");
  for (llvm::StringRef part : parts) items.push_back(part.str());
  return items;
}

}  // namespace

Loader &Loader::instance() {
  static Loader *loader = new Loader;  // never destroyed: handles may be used until exit
  return *loader;
}

uint32_t Loader::addImage(DeviceImage image, const std::string &file, unsigned index, Handle *owner) {
  std::string label = (file.empty() ? std::string("(main program)") : file) + ": " + image.label(index);
  const xxh3::Hash128 xxh = xxh3::hash128(image.bytes.data(), image.bytes.size());
  const ContentHash hash{xxh.low, xxh.high};
  // Ids of unloaded images are taken again, so that what is sized by the ids stays the size
  // of what is loaded, however often images come and go.
  uint32_t id = static_cast<uint32_t>(images_.size());
  if (!freeIds_.empty()) {
    id = freeIds_.back();
    freeIds_.pop_back();
  } else {
    images_.emplace_back();
    imagePointers_.push_back(nullptr);
  }
  if (Debug::get().on(Debug::Libs))
    Debug::get().print("loaded " + label + " (" + std::to_string(image.symbols.size()) + " symbols, id " +
                       std::to_string(id) + ")");
  images_[id] = std::make_unique<LoadedImage>(
      LoadedImage{std::move(image), std::move(label), file, index, owner, false, hash, hash, {}});
  imagePointers_[id] = &images_[id]->image;
  for (const Symbol &s : images_[id]->image.symbols)
    if (s.kind == SymbolKind::Import) importers_[std::string(s.name)].push_back(id);
  return id;
}

void Loader::joinGlobalScope(const std::vector<uint32_t> &ids) {
  programOfRoot_.clear();  // resolution may now bind differently
  for (uint32_t id : ids) {
    if (images_[id]->global) continue;
    images_[id]->global = true;
    globalOrder_.push_back(id);
    global_.add(images_[id]->image, id);
    if (Debug::get().on(Debug::Libs)) Debug::get().print("global scope += " + images_[id]->label);
  }
  // The process's first scope is reported once DEVDL_PRELOAD has taken its place in it.
  if (preloaded_) reportDuplicates(ids);
}

void Loader::reportDuplicates(const std::vector<uint32_t> &ids) {
  if (!Debug::get().on(Debug::Symbols)) return;
  for (uint32_t id : ids)
    for (const Symbol &s : images_[id]->image.symbols) {
      if (s.kind == SymbolKind::Import || !candidate(Definition{id, s.kind, LinkFamily::None})) continue;
      const Definition *first = firstCandidate(global_.definitions(s.name), linkFamily(images_[id]->image.format));
      if (first && first->image != id)
        Debug::get().print("duplicate definition of `" + std::string(s.name) + "` in " + images_[id]->label +
                           " (the one in " + images_[first->image]->label + " is used)");
    }
}

void Loader::rebuildGlobalIndex() {
  global_ = SymbolIndex();
  for (uint32_t id : globalOrder_) global_.add(images_[id]->image, id);
}

void Loader::dropImages(const std::vector<uint32_t> &ids) {
  programOfRoot_.clear();
  const std::set<uint32_t> dropped(ids.begin(), ids.end());
  for (auto &program : programs_)
    llvm::erase_if(program->plans, [&](const std::vector<uint32_t> &plan) {
      return llvm::any_of(plan, [&](uint32_t id) { return dropped.count(id); });
    });
  llvm::erase_if(programs_, [](const std::unique_ptr<LinkedProgram> &p) { return p->plans.empty(); });
  const size_t before = globalOrder_.size();
  llvm::erase_if(globalOrder_, [&](uint32_t id) { return dropped.count(id); });
  if (globalOrder_.size() != before) rebuildGlobalIndex();
  for (uint32_t id : ids) {
    for (const Symbol &s : images_[id]->image.symbols) {
      if (s.kind != SymbolKind::Import) continue;
      auto it = importers_.find(s.name);
      if (it == importers_.end()) continue;
      llvm::erase_value(it->second, id);
      if (it->second.empty()) importers_.erase(it);
    }
    if (Debug::get().on(Debug::Libs)) Debug::get().print("unloaded " + images_[id]->label);
    images_[id].reset();
    imagePointers_[id] = nullptr;
    freeIds_.push_back(id);
  }
}

llvm::Error Loader::scanProcess() {
  const uint64_t generation = bundle::loadedObjectsGeneration();
  if (generation == scannedGeneration_) {
    // Nothing loaded or unloaded; only a promotion to the global scope (a second dlopen with
    // RTLD_GLOBAL) can have changed what is global, and that counts as neither.
    for (auto &[address, pb] : processBundles_)
      if (!pb.global && dlsym(RTLD_DEFAULT, pb.symbol.c_str())) {
        pb.global = true;
        joinGlobalScope(pb.images);
      }
    return llvm::Error::success();
  }
  scannedGeneration_ = generation;
  std::set<const uint8_t *> present;
  for (const bundle::LoadedBundle &loaded : bundle::findLoadedBundles()) {
    present.insert(loaded.bytes.data());
    auto [it, isNew] = processBundles_.try_emplace(loaded.bytes.data());
    ProcessBundle &pb = it->second;
    if (isNew) {
      pb.symbol = bundle::defaultBundleSymbol(loaded.bytes);
      pb.main = loaded.object.empty();
      pb.object = loaded.object;
      auto images = readBundleImages(loaded.bytes, nullptr);
      if (!images) {
        // A broken bundle in some loaded object must not stop the others from loading.
        llvm::consumeError(images.takeError());
        continue;
      }
      for (size_t i = 0; i < images->size(); ++i)
        pb.images.push_back(addImage(std::move((*images)[i]), loaded.object, static_cast<unsigned>(i), nullptr));
    }
    // An object opened RTLD_LOCAL joins the global scope when the host promotes it.
    if (!pb.global && (pb.main || dlsym(RTLD_DEFAULT, pb.symbol.c_str()))) {
      pb.global = true;
      joinGlobalScope(pb.images);
    }
  }
  if (!preloaded_) {
    loadPreloads();
    preloaded_ = true;
    reportDuplicates(globalOrder_);
  }
  // Objects the host has unloaded: their bundles are gone from memory.
  for (auto it = processBundles_.begin(); it != processBundles_.end();) {
    if (present.count(it->first)) {
      ++it;
      continue;
    }
    dropImages(it->second.images);
    it = processBundles_.erase(it);
  }
  return llvm::Error::success();
}

bool Loader::candidate(const Definition &d) {
  // Like the seed's urDeviceSelectBinary check: an image the device cannot take (a cubin on
  // OpenCL, a cubin for another GPU generation) never satisfies an import, whatever its names.
  LoadedImage &loaded = *images_[d.image];
  if (loaded.candidacy == LoadedImage::Candidacy::Unknown) {
    backend::Device *device = deviceFor(loaded.image);
    loaded.candidacy =
        device && device->accepts(loaded.image) ? LoadedImage::Candidacy::Yes : LoadedImage::Candidacy::No;
  }
  return loaded.candidacy == LoadedImage::Candidacy::Yes;
}

const Definition *Loader::firstCandidate(std::span<const Definition> definitions, LinkFamily family) {
  for (const Definition &d : definitions)
    if ((family == LinkFamily::None || d.family == family) && candidate(d)) return &d;
  return nullptr;
}

std::optional<uint32_t> Loader::resolve(std::string_view symbol, uint32_t importer) {
  const LoadedImage &image = *images_[importer];
  // Only images of the importer's family link with it.
  const LinkFamily family = linkFamily(image.image.format);
  auto inGlobal = [&]() -> std::optional<uint32_t> {
    if (const Definition *d = firstCandidate(global_.definitions(symbol), family)) return d->image;
    return std::nullopt;
  };
  auto inLocal = [&]() -> std::optional<uint32_t> {
    if (image.owner)
      if (const Definition *d = firstCandidate(image.owner->local.definitions(symbol), family)) return d->image;
    return std::nullopt;
  };
  if (image.owner && image.owner->deepbind) {
    if (auto local = inLocal()) return local;
    return inGlobal();
  }
  if (auto global = inGlobal()) return global;
  return inLocal();
}

namespace {

// The backend a DEVDL_BACKEND value names; nullopt for a name devdl does not know.
std::optional<int> backendNumber(std::string_view name) {
  if (name == "opencl") return DEVDL_BACKEND_OPENCL;
  if (name == "cuda") return DEVDL_BACKEND_CUDA;
  if (name == "level_zero" || name == "level-zero") return DEVDL_BACKEND_LEVEL_ZERO;
  return std::nullopt;
}

std::string_view backendName(int backend) {
  switch (backend) {
    case DEVDL_BACKEND_OPENCL: return "opencl";
    case DEVDL_BACKEND_CUDA: return "cuda";
    case DEVDL_BACKEND_LEVEL_ZERO: return "level_zero";
  }
  return "unknown";
}

// The backend that links images of a family.
int backendOf(LinkFamily family) {
  switch (family) {
    case LinkFamily::Spirv: return DEVDL_BACKEND_OPENCL;
    case LinkFamily::Cuda: return DEVDL_BACKEND_CUDA;
    default: return 0;
  }
}

}  // namespace

backend::Device *Loader::deviceFor(const DeviceImage &image, std::string *why) {
  const int which = backendOf(linkFamily(image.format));
  if (!which) {
    if (why) *why = "no backend links " + std::string(formatName(image.format)) + " images";
    return nullptr;
  }
  auto dev = device(which);
  if (!dev) {
    const std::string reason = llvm::toString(dev.takeError());
    if (why) *why = reason;
    return nullptr;
  }
  return *dev;
}

const std::string &Loader::backendChoice() {
  // Read once, as the host loader reads its environment once.
  static const std::string chosen = [] {
    const char *value = std::getenv("DEVDL_BACKEND");
    return std::string(value ? value : "");
  }();
  return chosen;
}

llvm::Expected<backend::Device *> Loader::device(int which) {
  if (const std::string &chosen = backendChoice(); !chosen.empty()) {
    auto named = backendNumber(chosen);
    if (!named)
      return fail(ErrorCode::Unsupported, "DEVDL_BACKEND=" + chosen + ": no such backend (opencl, cuda and level_zero are)");
    // A device the program attached to is used whatever the variable says.
    if (*named != which && !backends_[which].device)
      return fail(ErrorCode::NotFound, "the " + std::string(backendName(which)) +
                                           " backend is not used: DEVDL_BACKEND=" + chosen);
  }
  BackendSlot &slot = backends_[which];
  if (!slot.tried) {
    slot.tried = true;
    llvm::Expected<std::unique_ptr<backend::Device>> opened =
        which == DEVDL_BACKEND_OPENCL ? llvm::Expected<std::unique_ptr<backend::Device>>(backend::opencl::Device::openDefault())
        : which == DEVDL_BACKEND_CUDA ? llvm::Expected<std::unique_ptr<backend::Device>>(backend::cuda::Device::openDefault())
                                      : fail(ErrorCode::Unsupported, "the " + std::string(backendName(which)) +
                                                                         " backend is not in this build");
    if (opened) {
      slot.device = std::move(*opened);
      if (Debug::get().on(Debug::Libs))
        Debug::get().print("backend " + std::string(backendName(which)) + ": device " + slot.device->name() +
                           ", linking by " + std::string(slot.device->linkMethod()));
    } else {
      slot.error = llvm::toString(opened.takeError());
    }
  }
  if (!slot.device) return fail(ErrorCode::NotFound, slot.error);
  return slot.device.get();
}

std::string Loader::whyNotCandidate(const DeviceImage &image) {
  std::string why;
  if (backend::Device *dev = deviceFor(image, &why)) dev->accepts(image, &why);
  return why;
}

std::string Loader::whyUnresolved(std::string_view symbol, uint32_t importer) {
  // A definition the importer could link with, in an image the device cannot take (or no
  // device at all): that is the reason to give.
  const LoadedImage &image = *images_[importer];
  const LinkFamily family = linkFamily(image.image.format);
  for (const SymbolIndex *scope : {&global_, image.owner ? &image.owner->local : nullptr}) {
    if (!scope) continue;
    for (const Definition &d : scope->definitions(symbol)) {
      if (d.family != family) continue;
      const LoadedImage &definer = *images_[d.image];
      return " (" + definer.label + " defines it, but " + whyNotCandidate(definer.image) + ")";
    }
  }
  return "";
}

llvm::Expected<LinkedProgram *> Loader::programFor(uint32_t root) {
  // Like the host loader's bindings, a program stays as it was linked while its images are
  // loaded; a new link sees the process as it is now.
  if (auto it = programOfRoot_.find(root); it != programOfRoot_.end()) return it->second;
  if (llvm::Error err = scanProcess()) return err;
  if (!images_[root]) return fail(ErrorCode::NotFound, "the image was unloaded with its host object");
  const uint32_t roots[] = {root};
  LinkPlan plan = computeLinkPlan(roots, imagePointers_, [&](std::string_view symbol, uint32_t importer) {
    return resolve(symbol, importer);
  });
  if (!plan.unresolved.empty()) {
    std::string message;
    for (const auto &u : plan.unresolved)
      message += (message.empty() ? "" : "\n") + images_[u.importer]->label + ": undefined device symbol `" +
                 std::string(u.symbol) + "`" + whyUnresolved(u.symbol, u.importer);
    return fail(ErrorCode::Unresolved, message);
  }
  std::string why;
  backend::Device *dev = deviceFor(images_[root]->image, &why);
  if (!dev) return fail(ErrorCode::Unsupported, images_[root]->label + ": " + why);
  // The same code linked for the same device is the same program, whichever handles or
  // files the images came from (the seed's key: the plan's images, sorted). A program that
  // holds all of the plan's images serves it too (the seed's nested key: a library's kernel
  // from the program linked for the application that imports it): its images define each
  // symbol once, so the plan's imports are bound there as the plan binds them.
  std::vector<ContentHash> key;
  for (uint32_t id : plan.images) key.push_back(images_[id]->hash);
  std::sort(key.begin(), key.end());
  for (const auto &program : programs_)
    if (program->device == dev && std::includes(program->key.begin(), program->key.end(), key.begin(), key.end())) {
      if (Debug::get().on(Debug::Statistics))
        Debug::get().print("program for " + images_[root]->label + ": in memory (" + std::to_string(key.size()) +
                           " of its " + std::to_string(program->key.size()) + " images)");
      if (!llvm::is_contained(program->plans, plan.images)) program->plans.push_back(plan.images);
      programOfRoot_[root] = program.get();
      return program.get();
    }
  // Linked with the loaded images that import from it, so that their kernels find this
  // program later rather than build the plan's code again (the seed's double compilation when
  // a library's kernel comes first). Should that link fail, the plan is linked alone.
  std::vector<std::vector<uint32_t>> plans{plan.images};
  std::vector<uint32_t> withImporters{root};
  for (uint32_t importer : importersOf(plan, dev, plans)) withImporters.push_back(importer);
  LinkPlan linked = withImporters.size() == 1 ? plan
                                              : computeLinkPlan(withImporters, imagePointers_,
                                                                [&](std::string_view symbol, uint32_t importer) {
                                                                  return resolve(symbol, importer);
                                                                });
  auto build = [&](const LinkPlan &what, bool &cached) {
    if (Debug::get().on(Debug::Bindings))
      for (const Binding &b : what.bindings)
        Debug::get().print("binding `" + std::string(b.symbol) + "`: " + images_[b.importer]->label + " -> " +
                           images_[b.definer]->label);
    key.clear();
    for (uint32_t id : what.images) key.push_back(images_[id]->hash);
    std::sort(key.begin(), key.end());
    std::vector<backend::LinkInput> inputs;
    for (uint32_t id : what.images)
      inputs.push_back({&images_[id]->image, images_[id]->label, &images_[id]->specConstants});
    return buildProgram(*dev, key, inputs, cached);
  };
  const auto start = std::chrono::steady_clock::now();
  bool cached = false;
  auto built = build(linked, cached);
  if (!built && withImporters.size() > 1) {
    if (Debug::get().on(Debug::Statistics))
      Debug::get().print("program for " + images_[root]->label + ": with its importers it did not link (" +
                         llvm::toString(built.takeError()) + "); linked alone");
    else
      llvm::consumeError(built.takeError());
    plans.resize(1);
    linked = plan;
    built = build(linked, cached);
  }
  if (!built) return built.takeError();
  plan = std::move(linked);
  if (Debug::get().on(Debug::Statistics)) {
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    Debug::get().print("program for " + images_[root]->label + ": " + std::to_string(plan.images.size()) +
                       " images, " + std::to_string(plan.bindings.size()) + " bindings, " +
                       (cached ? "loaded from the disk cache in " : "linked in ") +
                       llvm::formatv("{0:f2}", ms).str() + " ms on " + dev->name() +
                       (cached ? "" : " (" + std::string(dev->linkMethod()) + ")"));
  }
  programs_.push_back(std::unique_ptr<LinkedProgram>(new LinkedProgram{std::move(key), std::move(plans), dev, std::move(*built)}));
  programOfRoot_[root] = programs_.back().get();
  return programs_.back().get();
}

std::vector<uint32_t> Loader::importersOf(const LinkPlan &plan, backend::Device *dev,
                                          std::vector<std::vector<uint32_t>> &plans) {
  std::vector<uint32_t> found;
  std::set<uint32_t> inPlan(plan.images.begin(), plan.images.end()), seen;
  // A worklist over the exports of what the program holds: the cost follows the imports of
  // those names, never the number of loaded images.
  std::vector<uint32_t> work(plan.images.begin(), plan.images.end());
  while (!work.empty()) {
    const uint32_t id = work.back();
    work.pop_back();
    for (const Symbol &s : images_[id]->image.symbols) {
      if (s.kind == SymbolKind::Import) continue;
      auto it = importers_.find(s.name);
      if (it == importers_.end()) continue;
      for (uint32_t importer : it->second) {
        if (inPlan.count(importer) || !seen.insert(importer).second) continue;
        // Of this device's family, and an image the device takes (candidate() asks of the image).
        if (deviceFor(images_[importer]->image) != dev || !candidate(Definition{importer, SymbolKind::Kernel, LinkFamily::None}))
          continue;
        if (resolve(s.name, importer) != id) continue;  // its import binds elsewhere
        const uint32_t roots[] = {importer};
        LinkPlan own = computeLinkPlan(roots, imagePointers_, [&](std::string_view symbol, uint32_t from) {
          return resolve(symbol, from);
        });
        if (!own.unresolved.empty()) continue;  // LAZY: its missing symbols are its own business
        found.push_back(importer);
        plans.push_back(own.images);
        for (uint32_t member : own.images)
          if (inPlan.insert(member).second) work.push_back(member);
      }
    }
  }
  return found;
}

llvm::Expected<std::unique_ptr<backend::Program>> Loader::buildProgram(backend::Device &dev,
                                                                      const std::vector<ContentHash> &key,
                                                                      std::span<const backend::LinkInput> inputs,
                                                                      bool &cached) {
  using Clock = std::chrono::steady_clock;
  auto nanoseconds = [](Clock::time_point since) {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - since).count());
  };
  cache::DiskCache &disk = cache::DiskCache::process();
  std::optional<cache::Key> diskKey;
  if (disk.enabled()) {
    // The seed's key, with the images sorted by content rather than by the names they define.
    cache::KeyBuilder builder;
    builder.add(dev.identity());
    for (const ContentHash &hash : key) builder.add(hash.low).add(hash.high);
    diskKey = builder.finish();
    const auto start = Clock::now();
    if (std::optional<cache::Entry> entry = disk.load(*diskKey)) {
      const uint64_t read = nanoseconds(start);
      auto loaded = dev.load(entry->binary());
      if (loaded) {
        const uint64_t total = nanoseconds(start);
        disk.saved(entry->buildNanoseconds, total);
        if (Debug::get().on(Debug::Statistics))
          Debug::get().print("cache: hit " + diskKey->hex() + " for " + inputs.front().label + ": " +
                             std::to_string(entry->binary().size()) + " bytes read and verified in " +
                             llvm::formatv("{0:f1}", read / 1e3).str() + " us, loaded by the driver in " +
                             llvm::formatv("{0:f1}", (total - read) / 1e3).str() + " us");
        cached = true;
        return std::move(*loaded);
      }
      disk.discard(*diskKey, "refused by " + dev.name() + ": " + llvm::toString(loaded.takeError()));
    } else if (Debug::get().on(Debug::Statistics) && disk.enabled()) {
      Debug::get().print("cache: miss " + diskKey->hex() + " for " + inputs.front().label);
    }
  }
  // Asking for the binary costs (PoCL compiles the kernels for it): only when it is stored.
  const bool store = diskKey && disk.enabled();
  std::string binary;
  const auto start = Clock::now();
  auto built = dev.link(inputs, store ? &binary : nullptr);
  if (!built) return built.takeError();
  if (store) {
    std::string description = dev.name();
    for (const backend::LinkInput &input : inputs) description += "\n" + input.label;
    disk.store(*diskKey, description, binary, nanoseconds(start));
  }
  return built;
}

llvm::Expected<void *> Loader::open(const char *path, int flags) {
  std::lock_guard lock(mutex_);
  if (llvm::Error err = scanProcess()) return err;
  if (!path) return globalHandle();
  if ((flags & (DEVDL_LAZY | DEVDL_NOW)) == 0)
    return fail(ErrorCode::InvalidArgument, "device_dlopen: flags must include DEVDL_LAZY or DEVDL_NOW");
  auto handle = openFile(findFile(path), flags);
  if (!handle) return handle.takeError();
  return *handle;
}

void Loader::loadPreloads() {
  const char *list = getauxval(AT_SECURE) ? nullptr : std::getenv("DEVDL_PRELOAD");
  if (!list || !*list) return;
  // Right after the executable and the LD_PRELOAD objects, before the libraries: the images
  // of those objects are the first in the global scope at this point.
  std::set<std::string> hostPreloads;
  for (const std::string &item : preloadList(std::getenv("LD_PRELOAD"))) hostPreloads.insert(item);
  size_t position = 0;
  for (const auto &[address, pb] : processBundles_)
    if (pb.main || hostPreloads.count(pb.object))
      for (uint32_t id : pb.images)
        position = std::max<size_t>(position, llvm::find(globalOrder_, id) - globalOrder_.begin() + 1);
  // As with LD_PRELOAD, a file that cannot be loaded is reported and skipped.
  for (const std::string &item : preloadList(list)) {
    auto handle = openFile(findFile(item.c_str()), DEVDL_LAZY | DEVDL_GLOBAL | DEVDL_NODELETE);
    if (!handle) {
      std::fprintf(stderr, "devdl: DEVDL_PRELOAD: %s: ignored\n", llvm::toString(handle.takeError()).c_str());
      continue;
    }
    // openFile appended the images to the global scope: move them to their place.
    const std::vector<uint32_t> &ids = (*handle)->images;
    llvm::erase_if(globalOrder_, [&](uint32_t id) { return llvm::is_contained(ids, id); });
    globalOrder_.insert(globalOrder_.begin() + std::min(position, globalOrder_.size()), ids.begin(), ids.end());
    position += ids.size();
    if (Debug::get().on(Debug::Libs)) Debug::get().print("preloaded " + (*handle)->path);
  }
  rebuildGlobalIndex();
}

llvm::Expected<Handle *> Loader::reopen(const Handle::Identity &identity, int flags) {
  for (const auto &h : handles_) {
    if (!(h->identity == identity)) continue;
    // As dlopen(RTLD_NOW) of a library loaded lazily: its links are made now, or the open
    // fails and the handle stays as it was.
    if ((flags & DEVDL_NOW) && !h->linkedNow)
      if (llvm::Error err = linkNow(*h)) return err;
    ++h->references;
    h->nodelete |= (flags & DEVDL_NODELETE) != 0;
    if ((flags & DEVDL_GLOBAL) && !h->global) {
      h->global = true;
      joinGlobalScope(h->images);
    }
    return h.get();
  }
  return nullptr;
}

llvm::Expected<Handle *> Loader::openFile(const std::string &file, int flags) {
  // The file is opened once: the identity that finds it again and the bytes read are the same
  // file's, whatever is renamed over its path meanwhile.
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return inFile(fail(errno == ENOENT ? ErrorCode::NotFound : ErrorCode::Io, std::strerror(errno)), file);
  const auto closeFd = llvm::make_scope_exit([fd] { ::close(fd); });
  struct stat st {};
  if (fstat(fd, &st) != 0) return inFile(fail(ErrorCode::Io, std::strerror(errno)), file);
  if (S_ISDIR(st.st_mode)) return inFile(fail(ErrorCode::Io, std::strerror(EISDIR)), file);
  const Handle::Identity identity{st.st_dev, st.st_ino, nullptr};
  auto again = reopen(identity, flags);
  if (!again || *again) return again;
  if (flags & DEVDL_NOLOAD) return fail(ErrorCode::NotFound, file + ": not loaded (DEVDL_NOLOAD)");
  // Anything but a regular file (a pipe) is read to its end.
  auto read = readImageFile(fd, S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : ~uint64_t(0), file);
  if (!read) return read.takeError();
  return addHandle(std::move(*read), identity, flags);
}

llvm::Expected<Handle *> Loader::openMemory(Bytes bytes, std::string name, int flags) {
  const Handle::Identity identity{0, 0, bytes.data()};
  auto again = reopen(identity, flags);
  if (!again || *again) return again;
  if (flags & DEVDL_NOLOAD) return fail(ErrorCode::NotFound, name + ": not loaded (DEVDL_NOLOAD)");
  auto read = readImageMemory(bytes, std::move(name), nullptr);
  if (!read) return read.takeError();
  return addHandle(std::move(*read), identity, flags);
}

llvm::Expected<Handle *> Loader::addHandle(ImageFile read, const Handle::Identity &identity, int flags) {
  auto handle = std::make_unique<Handle>();
  handle->path = read.name;
  handle->identity = identity;
  handle->references = 1;
  handle->nodelete = (flags & DEVDL_NODELETE) != 0;
  handle->deepbind = (flags & DEVDL_DEEPBIND) != 0;
  for (size_t i = 0; i < read.images.size(); ++i) {
    const uint32_t id = addImage(std::move(read.images[i]), read.name, static_cast<unsigned>(i), handle.get());
    handle->images.push_back(id);
    handle->local.add(images_[id]->image, id);
  }
  if (flags & DEVDL_GLOBAL) {
    handle->global = true;
    joinGlobalScope(handle->images);
  }
  if (flags & DEVDL_NOW) {
    // On failure the loader is left as it was before this call.
    if (llvm::Error err = linkNow(*handle)) {
      dropImages(handle->images);
      return err;
    }
  }
  handles_.push_back(std::move(handle));
  return handles_.back().get();
}

llvm::Error Loader::linkNow(Handle &handle) {
  // Every import must resolve now: the kernels' programs are linked now.
  for (uint32_t id : handle.images) {
    const bool hasKernel =
        llvm::any_of(images_[id]->image.symbols, [](const Symbol &s) { return s.kind == SymbolKind::Kernel; });
    if (!hasKernel) continue;
    auto program = programFor(id);
    if (!program) return program.takeError();
  }
  handle.linkedNow = true;
  return llvm::Error::success();
}

llvm::Expected<void *> Loader::openMemory(const void *data, size_t size, const char *name, int flags) {
  std::lock_guard lock(mutex_);
  if (llvm::Error err = scanProcess()) return err;
  if (!data || !size) return fail(ErrorCode::InvalidArgument, "device_dlopen_mem: no data");
  if ((flags & (DEVDL_LAZY | DEVDL_NOW)) == 0)
    return fail(ErrorCode::InvalidArgument, "device_dlopen_mem: flags must include DEVDL_LAZY or DEVDL_NOW");
  auto handle = openMemory(Bytes(static_cast<const uint8_t *>(data), size), name ? name : "(memory)", flags);
  if (!handle) return handle.takeError();
  return *handle;
}

llvm::Expected<const Definition *> Loader::lookup(void *handlePtr, std::string_view name) {
  const Definition *definition = nullptr;
  const Handle *handle = nullptr;  // null: the global scope
  if (handlePtr == globalHandle()) {
    auto findGlobal = [&] { return firstCandidate(global_.definitions(name)); };
    // Objects the host loads later come later in search order and cannot shadow what is found
    // now; only a definition from a host object, which may have been unloaded since, or none at
    // all needs a look at the process first.
    definition = findGlobal();
    if (!definition || !images_[definition->image]->owner) {
      if (llvm::Error err = scanProcess()) return err;
      definition = findGlobal();
    }
  } else {
    auto it = llvm::find_if(handles_, [&](const auto &h) { return h.get() == handlePtr; });
    if (it == handles_.end()) return fail(ErrorCode::InvalidArgument, "invalid handle");
    handle = it->get();
    definition = firstCandidate(handle->local.definitions(name));
  }
  if (!definition) {
    // Defined, but only in images no device here can take: say so rather than "undefined".
    auto all = handle ? handle->local.definitions(name) : global_.definitions(name);
    if (!all.empty()) {
      const LoadedImage &first = *images_[all.front().image];
      return fail(ErrorCode::Unsupported, first.label + ": `" + std::string(name) + "` is in a " +
                                              std::string(formatName(first.image.format)) +
                                              " image, which cannot be linked here: " + whyNotCandidate(first.image));
    }
    return fail(ErrorCode::NotFound, (handle ? handle->path : std::string("the global scope")) +
                                         ": undefined device symbol `" + std::string(name) + "`");
  }
  return definition;
}

llvm::Expected<void *> Loader::symbol(void *handlePtr, std::string_view name) {
  std::lock_guard lock(mutex_);
  auto found = lookup(handlePtr, name);
  if (!found) return found.takeError();
  const Definition *definition = *found;
  // A variable has an instance in each program its image is linked into: the address given
  // is the one in the first program that holds it, which is where the kernels that were
  // requested before it read it. Only with no such program is one linked for the image.
  LinkedProgram *program = nullptr;
  if (definition->kind != SymbolKind::Kernel)
    for (const auto &p : programs_)
      if (p->holds(definition->image)) {
        program = p.get();
        break;
      }
  if (!program) {
    auto linked = programFor(definition->image);
    if (!linked) return linked.takeError();
    program = *linked;
  }
  backend::Program &native = *program->program;
  auto address = definition->kind == SymbolKind::Kernel     ? native.kernel(name)
                 : definition->kind == SymbolKind::Variable ? native.variable(name)
                                                            : native.function(name);
  if (!address) return inImage(address.takeError(), images_[definition->image]->label);
  return *address;
}

llvm::Error Loader::symbolInfo(void *handlePtr, std::string_view name, devdl_symbol_info &out) {
  std::lock_guard lock(mutex_);
  auto found = lookup(handlePtr, name);
  if (!found) return found.takeError();
  const LoadedImage &image = *images_[(*found)->image];
  out.kind = (*found)->kind == SymbolKind::Kernel     ? DEVDL_SYMBOL_KERNEL
             : (*found)->kind == SymbolKind::Variable ? DEVDL_SYMBOL_VARIABLE
                                                      : DEVDL_SYMBOL_FUNCTION;
  out.file = image.file.c_str();
  out.image = image.index;
  out.format = formatName(image.image.format).data();  // the names are NUL-terminated literals
  return llvm::Error::success();
}

llvm::Expected<std::string> Loader::planText(void *handlePtr, std::string_view name) {
  std::lock_guard lock(mutex_);
  auto found = lookup(handlePtr, name);
  if (!found) return found.takeError();
  if ((*found)->kind != SymbolKind::Kernel)
    return fail(ErrorCode::InvalidArgument, "`" + std::string(name) + "` is not a kernel");
  if (llvm::Error err = scanProcess()) return err;
  const uint32_t roots[] = {(*found)->image};
  const LinkPlan plan = computeLinkPlan(roots, imagePointers_, [&](std::string_view symbol, uint32_t importer) {
    return resolve(symbol, importer);
  });
  std::string text = std::string(name) + ": " + images_[roots[0]]->label + "\n";
  for (const Binding &b : plan.bindings)
    text += "  " + std::string(b.symbol) + " (" + images_[b.importer]->label + ") -> " + images_[b.definer]->label + "\n";
  for (const auto &u : plan.unresolved)
    text += "  " + std::string(u.symbol) + " (" + images_[u.importer]->label + ") -> undefined\n";
  if (!plan.unresolved.empty()) return fail(ErrorCode::Unresolved, text);
  return text;
}

std::vector<Loader::ImageSnapshot> Loader::snapshot() {
  std::lock_guard lock(mutex_);
  llvm::consumeError(scanProcess());
  std::vector<ImageSnapshot> list;
  auto add = [&](uint32_t id) {
    const LoadedImage &image = *images_[id];
    list.push_back({image.file, image.index, std::string(formatName(image.image.format)),
                    std::string(image.image.triple), image.global, image.image.symbols.size()});
  };
  for (uint32_t id : globalOrder_) add(id);
  for (uint32_t id = 0; id < images_.size(); ++id)
    if (images_[id] && !images_[id]->global) add(id);
  return list;
}

llvm::Error Loader::attach(const devdl_native &native) {
  std::lock_guard lock(mutex_);
  llvm::Expected<std::unique_ptr<backend::Device>> attached =
      native.backend == DEVDL_BACKEND_OPENCL
          ? llvm::Expected<std::unique_ptr<backend::Device>>(backend::opencl::Device::attach(
                static_cast<cl_device_id>(native.device), static_cast<cl_context>(native.context)))
      : native.backend == DEVDL_BACKEND_CUDA
          ? llvm::Expected<std::unique_ptr<backend::Device>>(backend::cuda::Device::attach(
                static_cast<int>(reinterpret_cast<intptr_t>(native.device)), native.context))
          : fail(ErrorCode::Unsupported, "device_dlattach: backend " + std::to_string(native.backend) +
                                             " is not in this build (opencl and cuda are)");
  if (!attached) return attached.takeError();
  BackendSlot &slot = backends_[native.backend];
  if (slot.device) {
    devdl_native current{sizeof current, 0, nullptr, nullptr, nullptr};
    slot.device->native(current);
    if (current.device == native.device && current.context == native.context) return llvm::Error::success();
    if (llvm::any_of(programs_, [&](const auto &p) { return p->device == slot.device.get(); }))
      return fail(ErrorCode::InvalidArgument, "device_dlattach: programs are already linked for " + slot.device->name());
  }
  programOfRoot_.clear();
  slot.tried = true;
  slot.device = std::move(*attached);
  for (auto &image : images_)  // another device may take other images
    if (image) image->candidacy = LoadedImage::Candidacy::Unknown;
  return llvm::Error::success();
}

llvm::Error Loader::close(void *handlePtr) {
  std::lock_guard lock(mutex_);
  if (handlePtr == globalHandle()) return llvm::Error::success();
  auto it = llvm::find_if(handles_, [&](const auto &h) { return h.get() == handlePtr; });
  if (it == handles_.end()) return fail(ErrorCode::InvalidArgument, "device_dlclose: invalid handle");
  Handle &handle = **it;
  if (--handle.references > 0 || handle.nodelete) return llvm::Error::success();
  dropImages(handle.images);
  handles_.erase(it);
  return llvm::Error::success();
}

llvm::Error Loader::specialize(void *handlePtr, unsigned specId, std::string_view value) {
  std::lock_guard lock(mutex_);
  auto it = llvm::find_if(handles_, [&](const auto &h) { return h.get() == handlePtr; });
  if (it == handles_.end()) return fail(ErrorCode::InvalidArgument, "device_dlspecialize: invalid handle");
  const Handle &handle = **it;
  if (value.size() != 1 && value.size() != 2 && value.size() != 4 && value.size() != 8)
    return fail(ErrorCode::InvalidArgument, handle.path + ": specialization constant " + std::to_string(specId) +
                                                ": a value of " + std::to_string(value.size()) +
                                                " bytes (1, 2, 4 or 8 are)");
  bool declared = false;
  for (uint32_t id : handle.images) {
    LoadedImage &loaded = *images_[id];
    const PropertySet *set = loaded.image.findSet(kSpecConstantsSet);
    if (!set || !llvm::any_of(set->properties, [&](const Property &p) { return p.type == PropertyType::UInt32 && p.u32 == specId; })) continue;
    declared = true;
    loaded.specConstants[specId] = std::string(value);
    // What the image's programs are keyed by: its bytes and the values set.
    cache::KeyBuilder builder;
    builder.add(loaded.bytesHash.low).add(loaded.bytesHash.high);
    for (const auto &[spec, bytes] : loaded.specConstants) builder.add(uint64_t(spec)).add(bytes);
    const cache::Key key = builder.finish();
    loaded.hash = {key.low, key.high};
  }
  if (!declared)
    return fail(ErrorCode::NotFound, handle.path + ": no image declares specialization constant " + std::to_string(specId));
  programOfRoot_.clear();  // later lookups link with the new values
  return llvm::Error::success();
}

llvm::Error Loader::native(devdl_native &out) {
  std::lock_guard lock(mutex_);
  int which = out.backend;
  if (which == 0) {
    // The default: the backend DEVDL_BACKEND names, else one in use, else the first that has
    // a device.
    // A name that is no backend: device() says so, as to device_dlopen.
    if (!backendChoice().empty()) which = backendNumber(backendChoice()).value_or(DEVDL_BACKEND_OPENCL);
    for (int b : {DEVDL_BACKEND_OPENCL, DEVDL_BACKEND_CUDA})
      if (!which && backends_[b].device) which = b;
    for (int b : {DEVDL_BACKEND_OPENCL, DEVDL_BACKEND_CUDA}) {
      if (which) break;
      auto dev = device(b);
      if (dev) which = b;
      else llvm::consumeError(dev.takeError());
    }
    if (which == 0) which = DEVDL_BACKEND_OPENCL;  // for its error below
  }
  if (which != DEVDL_BACKEND_OPENCL && which != DEVDL_BACKEND_CUDA && which != DEVDL_BACKEND_LEVEL_ZERO)
    return fail(ErrorCode::InvalidArgument, "device_dlnative: unknown backend " + std::to_string(which));
  auto dev = device(which);
  if (!dev) return dev.takeError();
  (*dev)->native(out);
  return llvm::Error::success();
}

}  // namespace devdl
