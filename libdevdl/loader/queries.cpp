// The queries beside device_dlsym: reading and writing variables (by name and by registered
// object), specialization constants by registered object, what a symbol is, what an address is
// (device_dladdr), a kernel's plan, and the images in search order.
#include "host/object_registry.h"
#include "image/registered_objects.h"
#include "loader/loader.h"
#include "support/error.h"

#include "devdl.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/StringExtras.h>

#include <cstdio>

namespace devdl {

llvm::Error Loader::copy(void *handlePtr, std::string_view name, size_t offset, void *host, size_t size,
                         bool toDevice) {
  LoaderLock lock(mutex_);
  auto located = lookups_.locate(lock, handlePtr, name);
  if (!located) return located.takeError();
  if (located->definition.kind != SymbolKind::Variable)
    return fail(ErrorCode::InvalidArgument, located->label + ": `" + std::string(name) + "` is a " +
                                                std::string(symbolKindName(located->definition.kind)) +
                                                ", not a device variable");
  return inImage(located->program->copyVariable(name, offset, host, size, toDevice), located->label);
}

llvm::Expected<std::pair<std::string, uint32_t>> Loader::objectIn(
    LoaderLock &lock, void *handlePtr, const void *object, std::string_view kind, std::string_view what,
    llvm::function_ref<bool(const DeviceImage &, std::string_view)> has) {
  char address[32];
  std::snprintf(address, sizeof address, "%p", object);
  const std::optional<host::ObjectRegistry::Entry> entry = host::ObjectRegistry::instance().find(object);
  if (!entry)
    return fail(ErrorCode::NotFound, std::string(what) + ": no host object is registered at " + address +
                                         " (__register_uniquely_identifiable_object, device_dlregister)");
  if (entry->kind != kind)
    return fail(ErrorCode::InvalidArgument, std::string(what) + ": the object at " + address + ", `" + entry->uniqueId +
                                                "`, is a " + entry->kind + ", not a " + std::string(kind));
  const std::optional<Handles::Target> target = handles_.targetOf(handlePtr);
  if (!target) return fail(ErrorCode::InvalidArgument, std::string(what) + ": invalid handle");
  const Handle *handle = target->handle == handles_.global() ? nullptr : handles_.find(target->handle);
  scan_.scan(lock);
  std::vector<uint32_t> scope;
  if (handle) scope = handle->local.images;
  for (uint32_t id : scopes_.globalOrder()) scope.push_back(id);
  for (uint32_t id : scope)
    if (images_.contains(id) && images_[id].loaded && has(images_[id].image, entry->uniqueId))
      return std::pair{entry->uniqueId, id};
  return fail(ErrorCode::NotFound, std::string(what) + ": the " + std::string(kind) + " `" + entry->uniqueId +
                                       "` registered at " + address + " is defined by no image in the scope of " +
                                       (handle ? handle->path : std::string("the global scope")));
}

llvm::Error Loader::copyObject(void *handlePtr, const void *object, size_t offset, void *host, size_t size,
                               bool toDevice) {
  const char *what = toDevice ? "device_dlwrite_object" : "device_dlread_object";
  std::string variable;
  uint32_t bytes = 0;
  {
    LoaderLock lock(mutex_);
    auto found = objectIn(lock, handlePtr, object, "device_global", what, [](const DeviceImage &image,
                                                                             std::string_view id) {
      return deviceGlobalOf(image, id).has_value();
    });
    if (!found) return found.takeError();
    const DeviceGlobal global = *deviceGlobalOf(images_[found->second].image, found->first);
    variable = std::string(global.variable);
    bytes = global.size;
  }
  if (offset > bytes || size > bytes - offset)
    return fail(ErrorCode::InvalidArgument, std::string(what) + ": the device global `" + variable + "` has " +
                                                std::to_string(bytes) + " bytes: " + std::to_string(size) +
                                                " at offset " + std::to_string(offset) + " are outside it");
  return copy(handlePtr, variable, offset, host, size, toDevice);
}

llvm::Error Loader::specializeObject(void *handlePtr, const void *object, std::string_view value) {
  std::vector<SpecConstantPart> parts;
  {
    LoaderLock lock(mutex_);
    auto found = objectIn(lock, handlePtr, object, "specialization_id", "device_dlspecialize_object",
                          [](const DeviceImage &image, std::string_view id) {
                            return !specConstantPartsOf(image, id).empty();
                          });
    if (!found) return found.takeError();
    parts = specConstantPartsOf(images_[found->second].image, found->first);
  }
  for (const SpecConstantPart &part : parts) {
    if (part.offset > value.size() || part.size > value.size() - part.offset)
      return fail(ErrorCode::InvalidArgument, "device_dlspecialize_object: a value of " + std::to_string(value.size()) +
                                                  " bytes: SpecId " + std::to_string(part.specId) + " takes " +
                                                  std::to_string(part.size) + " at offset " +
                                                  std::to_string(part.offset));
    if (llvm::Error err = specialize(handlePtr, part.specId, value.substr(part.offset, part.size))) return err;
  }
  return llvm::Error::success();
}

llvm::Error Loader::symbolInfo(void *handlePtr, std::string_view name, devdl_symbol_info &out) {
  LoaderLock lock(mutex_);
  auto found = lookups_.lookup(lock, handlePtr, name);
  if (!found) return found.takeError();
  const Definition &definition = found->definition;
  const LoadedImage &image = images_[definition.image];
  out.kind = definition.kind == SymbolKind::Kernel     ? DEVDL_SYMBOL_KERNEL
             : definition.kind == SymbolKind::Variable ? DEVDL_SYMBOL_VARIABLE
                                                       : DEVDL_SYMBOL_FUNCTION;
  out.file = image.file.c_str();
  out.image = image.index;
  out.format = formatName(image.image.format).data();  // the names are NUL-terminated literals
  return llvm::Error::success();
}

namespace {

// A variable or function a linked program defines, copied under the mutex.
struct Defined {
  std::string name;
  SymbolKind kind;
  std::string file;
  unsigned index;
};
struct DefinedIn {
  std::shared_ptr<backend::Program> program;
  std::vector<Defined> symbols;
};

// Where `symbol` starts, where `at` is in it (a variable's extent, a function's start); else null.
// Asked of the backend with the mutex let go.
void *startOf(const DefinedIn &linked, const Defined &symbol, uintptr_t at) {
  if (symbol.kind == SymbolKind::Variable) {
    auto extent = linked.program->variable(symbol.name);
    if (!extent) {
      llvm::consumeError(extent.takeError());  // a backend that gives no variables' addresses
      return nullptr;
    }
    const auto begin = reinterpret_cast<uintptr_t>(extent->address);
    return at < begin || at - begin >= extent->size ? nullptr : extent->address;
  }
  auto function = linked.program->function(symbol.name);
  if (!function) {
    llvm::consumeError(function.takeError());
    return nullptr;
  }
  return reinterpret_cast<uintptr_t>(*function) == at ? *function : nullptr;
}

}  // namespace

llvm::Error Loader::addressInfo(const void *address, devdl_addr_info &out) {
  // What each program defines, copied under the mutex; the backend is asked where each is with
  // the mutex let go. A name defined in several of a program's images is the first's (defines()).
  std::vector<DefinedIn> programs;
  {
    LoaderLock lock(mutex_);
    for (const auto &linked : programs_.cache().all()) {
      DefinedIn &each = programs.emplace_back(DefinedIn{linked->program, {}});
      llvm::StringSet<> seen;
      for (uint32_t id : linked->images)
        for (const Symbol &s : images_[id].image.symbols)
          if ((s.kind == SymbolKind::Variable || s.kind == SymbolKind::Function) && linked->defines(id, s.name) &&
              seen.insert(s.name).second)
            each.symbols.push_back({std::string(s.name), s.kind, images_[id].file, images_[id].index});
    }
  }
  const auto at = reinterpret_cast<uintptr_t>(address);
  for (const DefinedIn &linked : programs)
    for (const Defined &symbol : linked.symbols) {
      void *start = startOf(linked, symbol, at);
      if (!start) continue;
      LoaderLock lock(mutex_);
      out.file = addressNames_.insert(symbol.file).first->getKeyData();
      out.image = symbol.index;
      out.symbol = addressNames_.insert(symbol.name).first->getKeyData();
      out.symbol_address = start;
      out.offset = at - reinterpret_cast<uintptr_t>(start);
      out.kind = symbol.kind == SymbolKind::Variable ? DEVDL_SYMBOL_VARIABLE : DEVDL_SYMBOL_FUNCTION;
      return llvm::Error::success();
    }
  return fail(ErrorCode::NotFound, "device_dladdr: 0x" + llvm::utohexstr(at) +
                                       " is in no variable of a loaded program, nor a function's start");
}

llvm::Expected<std::string> Loader::planText(void *handlePtr, std::string_view name) {
  LoaderLock lock(mutex_);
  auto found = lookups_.lookup(lock, handlePtr, name);
  if (!found) return found.takeError();
  if (found->definition.kind != SymbolKind::Kernel)
    return fail(ErrorCode::InvalidArgument, "`" + std::string(name) + "` is not a kernel");
  scan_.scan(lock);
  const uint32_t root = found->definition.image;
  if (!images_.contains(root) || !images_[root].loaded)
    return fail(ErrorCode::NotFound, "`" + std::string(name) + "`: its image was unloaded meanwhile");
  std::optional<LinkPlan> made;
  const LinkPlan &plan = programs_.planOf(root, found->place, made);
  const Planner planner = programs_.planner(places_.placeFor(images_[root].image, found->place));
  const std::string text = std::string(name) + ": " + images_[root].label + "\n" + planner.text(plan);
  if (!plan.unresolved.empty() || !plan.setProblems.empty()) return fail(ErrorCode::Unresolved, text);
  return text;
}

std::vector<Loader::ImageSnapshot> Loader::snapshot() {
  LoaderLock lock(mutex_);
  scan_.scan(lock);
  std::vector<ImageSnapshot> list;
  auto add = [&](uint32_t id) {
    const LoadedImage &image = images_[id];
    list.push_back({image.file, image.index, std::string(formatName(image.image.format)),
                    std::string(image.image.triple), scopes_.isGlobal(id), image.image.symbols.size()});
  };
  for (uint32_t id : scopes_.globalOrder()) add(id);
  for (uint32_t id = 0; id < images_.end(); ++id)
    if (images_.contains(id) && images_[id].loaded && !scopes_.isGlobal(id)) add(id);
  return list;
}

}  // namespace devdl
