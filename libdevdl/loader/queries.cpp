// The queries beside device_dlsym: reading and writing variables (by name and by registered
// object), specialization constants by registered object, what a symbol is, what an address is
// (device_dladdr), a kernel's plan, and the images in search order.
#include "image/registered_objects.h"
#include "loader/loader.h"
#include "support/error.h"

#include "devdl.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/StringExtras.h>

namespace devdl {

llvm::Error Loader::copy(void *handlePtr, std::string_view name, size_t offset, void *host, size_t size,
                         bool toDevice) {
  LoaderLock lock(parts_.mutex);
  auto located = parts_.lookups.locate(lock, handlePtr, name);
  if (!located) return located.takeError();
  if (located->definition.kind != SymbolKind::Variable)
    return fail(ErrorCode::InvalidArgument, located->label + ": `" + std::string(name) + "` is a " +
                                                std::string(symbolKindName(located->definition.kind)) +
                                                ", not a device variable");
  return inImage(located->program->copyVariable(name, offset, host, size, toDevice), located->label);
}

llvm::Error Loader::copyObject(void *handlePtr, const void *object, size_t offset, void *host, size_t size,
                               bool toDevice) {
  const char *what = toDevice ? "device_dlwrite_object" : "device_dlread_object";
  std::string variable;
  uint32_t bytes = 0;
  {
    LoaderLock lock(parts_.mutex);
    auto found = parts_.lookups.objectIn(lock, handlePtr, object, "device_global", what,
                                         [](const DeviceImage &image, std::string_view id) {
                                           return deviceGlobalOf(image, id).has_value();
                                         });
    if (!found) return found.takeError();
    const DeviceGlobal global = *deviceGlobalOf(parts_.images[found->second].image, found->first);
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
    LoaderLock lock(parts_.mutex);
    auto found = parts_.lookups.objectIn(lock, handlePtr, object, "specialization_id", "device_dlspecialize_object",
                                         [](const DeviceImage &image, std::string_view id) {
                                           return !specConstantPartsOf(image, id).empty();
                                         });
    if (!found) return found.takeError();
    parts = specConstantPartsOf(parts_.images[found->second].image, found->first);
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
  LoaderLock lock(parts_.mutex);
  auto found = parts_.lookups.lookup(lock, handlePtr, name);
  if (!found) return found.takeError();
  const Definition &definition = found->definition;
  const LoadedImage &image = parts_.images[definition.image];
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
    LoaderLock lock(parts_.mutex);
    for (const auto &linked : parts_.programs.cache().all()) {
      DefinedIn &each = programs.emplace_back(DefinedIn{linked->program, {}});
      llvm::StringSet<> seen;
      for (uint32_t id : linked->images)
        for (const Symbol &s : parts_.images[id].image.symbols)
          if ((s.kind == SymbolKind::Variable || s.kind == SymbolKind::Function) && linked->defines(id, s.name) &&
              seen.insert(s.name).second)
            each.symbols.push_back({std::string(s.name), s.kind, parts_.images[id].file, parts_.images[id].index});
    }
  }
  const auto at = reinterpret_cast<uintptr_t>(address);
  for (const DefinedIn &linked : programs)
    for (const Defined &symbol : linked.symbols) {
      void *start = startOf(linked, symbol, at);
      if (!start) continue;
      LoaderLock lock(parts_.mutex);
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
  LoaderLock lock(parts_.mutex);
  auto found = parts_.lookups.lookup(lock, handlePtr, name);
  if (!found) return found.takeError();
  if (found->definition.kind != SymbolKind::Kernel)
    return fail(ErrorCode::InvalidArgument, "`" + std::string(name) + "` is not a kernel");
  parts_.scan.scan(lock);
  const uint32_t root = found->definition.image;
  if (!parts_.images.contains(root) || !parts_.images[root].loaded)
    return fail(ErrorCode::NotFound, "`" + std::string(name) + "`: its image was unloaded meanwhile");
  std::optional<LinkPlan> made;
  const LinkPlan &plan = parts_.programs.planOf(root, found->place, made);
  const Planner planner = parts_.programs.planner(parts_.places.placeFor(parts_.images[root].image, found->place));
  const std::string text = std::string(name) + ": " + parts_.images[root].label + "\n" + planner.text(plan);
  if (!plan.unresolved.empty() || !plan.setProblems.empty()) return fail(ErrorCode::Unresolved, text);
  return text;
}

std::vector<Loader::ImageSnapshot> Loader::snapshot() {
  LoaderLock lock(parts_.mutex);
  parts_.scan.scan(lock);
  std::vector<ImageSnapshot> list;
  auto add = [&](uint32_t id) {
    const LoadedImage &image = parts_.images[id];
    list.push_back({image.file, image.index, std::string(formatName(image.image.format)),
                    std::string(image.image.triple), parts_.scopes.isGlobal(id), image.image.symbols.size()});
  };
  for (uint32_t id : parts_.scopes.globalOrder()) add(id);
  for (uint32_t id = 0; id < parts_.images.end(); ++id)
    if (parts_.images.contains(id) && parts_.images[id].loaded && !parts_.scopes.isGlobal(id)) add(id);
  return list;
}

}  // namespace devdl
