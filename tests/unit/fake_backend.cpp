#include "unit/fake_backend.h"

#include "image/instance_cells.h"
#include "support/error.h"

#include "devdl.h"

#include <llvm/ADT/STLExtras.h>

#include <cstring>
#include <map>
#include <memory>

namespace devdl::test::fake {

namespace {

std::function<void(const Link &)> &hook() {
  static std::function<void(const Link &)> installed;
  return installed;
}

std::function<void()> &openHook() {
  static std::function<void()> installed;
  return installed;
}

void opening() {
  if (openHook()) openHook()();
}

using Values = std::map<std::string, uint64_t, std::less<>>;

class Program final : public backend::Program {
 public:
  Program(std::map<std::string, SymbolKind, std::less<>> defined, std::shared_ptr<Values> values)
      : defined_(std::move(defined)), values_(std::move(values)) {}

  llvm::Expected<void *> kernel(std::string_view name) override { return address(name, SymbolKind::Kernel); }
  llvm::Expected<backend::Extent> variable(std::string_view name) override {
    auto at = address(name, SymbolKind::Variable);
    if (!at) return at.takeError();
    return backend::Extent{*at, sizeof(int)};
  }
  llvm::Expected<void *> function(std::string_view name) override { return address(name, SymbolKind::Function); }
  llvm::Error copyVariable(std::string_view name, size_t offset, void *host, size_t size, bool toDevice) override {
    if (auto at = address(name, SymbolKind::Variable); !at) return at.takeError();
    if (llvm::Error err = backend::checkInsideVariable(name, sizeof(uint64_t), offset, size)) return err;
    std::lock_guard lock(linksMutex());
    char *there = reinterpret_cast<char *>(&(*values_)[std::string(name)]) + offset;
    std::memcpy(toDevice ? there : host, toDevice ? host : there, size);
    return llvm::Error::success();
  }

 private:
  // The address of the symbol's entry: distinct for each symbol and program, stable while the
  // program lives.
  llvm::Expected<void *> address(std::string_view name, SymbolKind kind) {
    auto it = defined_.find(name);
    if (it == defined_.end() || it->second != kind)
      return fail(ErrorCode::NotFound, "fake program: no " + std::string(symbolKindName(kind)) + " `" +
                                           std::string(name) + "`");
    return static_cast<void *>(&*it);
  }
  std::map<std::string, SymbolKind, std::less<>> defined_;
  std::shared_ptr<Values> values_;
};

class Device final : public backend::Device {
 public:
  int backend() const override { return cubins_ ? kCubinBackendNumber : kBackendNumber; }
  const std::string &name() const override { return name_; }
  explicit Device(bool gpu = false, bool cubins = false)
      : name_(cubins ? "fake cubin device" : gpu ? "fake GPU" : "fake device"), cubins_(cubins) {
    aspects_[gpu ? aspect::gpu : aspect::cpu] = aspects_[aspect::fp64] = true;  // fp64, and nothing else
  }
  std::string description() const override { return name_; }
  llvm::Error accepts(const DeviceImage &image) const override {
    if (image.format == (cubins_ ? ImageFormat::Cubin : ImageFormat::SpirV)) return llvm::Error::success();
    return fail(ErrorCode::Unsupported, cubins_ ? "the fake cubin device takes cubins only"
                                                : "the fake device takes SPIR-V only");
  }
  llvm::Expected<std::unique_ptr<backend::Program>> link(std::span<const backend::LinkInput> inputs,
                                                        std::string *binary) override {
    return linkAs(inputs, binary, false);
  }
  llvm::Expected<std::string> linkForRuntime(std::span<const backend::LinkInput> inputs) override {
    auto program = linkAs(inputs, nullptr, true);
    if (!program) return program.takeError();
    std::lock_guard lock(linksMutex());
    const std::string binary = "fake program for a runtime " + std::to_string(forRuntime_.size());
    forRuntime_[binary] = std::move(*program);
    return binary;
  }
  llvm::Expected<std::unique_ptr<backend::Program>> loadThrough(std::string_view binary,
                                                               const backend::RuntimeLoad &runtime) override {
    auto loaded = runtime.load(binary, "fake anchor");
    if (!loaded) return loaded.takeError();
    std::lock_guard lock(linksMutex());
    auto it = forRuntime_.find(binary);
    if (it == forRuntime_.end() || !it->second)
      return fail(ErrorCode::Unsupported, "the fake device linked no program `" + std::string(binary) + "` for a runtime");
    return std::move(it->second);
  }

 private:
  llvm::Expected<std::unique_ptr<backend::Program>> linkAs(std::span<const backend::LinkInput> inputs,
                                                          std::string *binary, bool forRuntime) {
    Link link;
    link.forRuntime = forRuntime;
    for (const backend::LinkInput &input : inputs) {
      link.inputs.push_back(input.label);
      link.interposed.emplace_back(input.interposed.begin(), input.interposed.end());
      link.specConstants.push_back(input.specConstants ? *input.specConstants : backend::SpecConstants());
      link.elsewhere.emplace_back(input.elsewhere.begin(), input.elsewhere.end());
      for (std::string_view name : input.interposedElsewhere) link.elsewhere.back().push_back(std::string(name) + " (interposed)");
    }
    link.values = std::make_shared<Values>();
    {
      std::lock_guard lock(linksMutex());
      links().push_back(link);
    }
    if (hook()) hook()(link);
    // As a linker: one definition of each name among the inputs, and one for every import; a
    // variable reached elsewhere is its cell, as the backends' edits make it.
    auto linkName = [](const backend::LinkInput &input, std::string_view name) {
      return llvm::is_contained(input.elsewhere, name) ? instanceCellName(name) : std::string(name);
    };
    std::map<std::string, SymbolKind, std::less<>> defined;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const backend::LinkInput &input = inputs[i];
      for (std::string_view name : input.interposedElsewhere) defined.emplace(interposedCellName(name, i), SymbolKind::Variable);
      for (const std::string &name : input.statics) defined.emplace(linkName(input, name), SymbolKind::Variable);  // exported so
      for (const Symbol &s : input.image->symbols) {
        if (s.kind == SymbolKind::Import || llvm::is_contained(input.interposed, s.name)) continue;
        if (!defined.emplace(linkName(input, s.name), s.kind).second)
          return fail(ErrorCode::Unsupported, input.label + ": multiple definition of `" + std::string(s.name) + "`");
      }
    }
    for (const backend::LinkInput &input : inputs)
      for (const Symbol &s : input.image->symbols)
        if (s.kind == SymbolKind::Import && !defined.count(linkName(input, s.name)))
          return fail(ErrorCode::Unresolved, input.label + ": undefined device symbol `" + std::string(s.name) + "`");
    if (binary) binary->clear();
    return std::make_unique<Program>(std::move(defined), link.values);
  }

 public:
  llvm::Expected<std::unique_ptr<backend::Program>> load(std::string_view) override {
    return fail(ErrorCode::Unsupported, "the fake device loads no binaries");
  }
  const std::string &identity() const override { return name_; }
  std::string_view linkMethod() const override { return "fake link"; }
  void native(devdl_native &out) const override {
    out.backend = backend();
    out.platform = nullptr;
    out.device = const_cast<Device *>(this);
    out.context = nullptr;
  }

 private:
  std::string name_;
  bool cubins_;
  std::map<std::string, std::unique_ptr<backend::Program>, std::less<>> forRuntime_;  // by binary, until loaded
};

constexpr LinkFamily kSpirv[] = {LinkFamily::Spirv};
constexpr LinkFamily kCuda[] = {LinkFamily::Cuda};
const backend::BackendEntry kTable[] = {
    {kBackendNumber, "fake", "", kSpirv,
     [] {
       opening();
       return llvm::Expected<std::unique_ptr<backend::Device>>(std::make_unique<Device>());
     },
     [](const devdl_native &native) {
       return llvm::Expected<std::unique_ptr<backend::Device>>(std::make_unique<Device>(native.platform == kGpu));
     }},
};

const backend::BackendEntry kTwoTables[] = {
    {101, "absent", "", kSpirv,
     [] {
       opening();
       return llvm::Expected<std::unique_ptr<backend::Device>>(fail(ErrorCode::NotFound, "no absent device here"));
     },
     [](const devdl_native &) {
       return llvm::Expected<std::unique_ptr<backend::Device>>(fail(ErrorCode::NotFound, "no absent device here"));
     }},
    kTable[0],
};

const backend::BackendEntry kWithCubins[] = {
    kTable[0],
    {kCubinBackendNumber, "fake-cubin", "", kCuda,
     [] { return llvm::Expected<std::unique_ptr<backend::Device>>(std::make_unique<Device>(false, true)); },
     [](const devdl_native &) {
       return llvm::Expected<std::unique_ptr<backend::Device>>(std::make_unique<Device>(false, true));
     }},
};

}  // namespace

std::span<const backend::BackendEntry> backendsWithAnAbsentOneFirst() { return kTwoTables; }

std::span<const backend::BackendEntry> backendsWithCubins() { return kWithCubins; }

std::vector<Link> &links() {
  static std::vector<Link> made;
  return made;
}

std::mutex &linksMutex() {
  static std::mutex mutex;
  return mutex;
}

void setLinkHook(std::function<void(const Link &)> set) { hook() = std::move(set); }

void setOpenHook(std::function<void()> set) { openHook() = std::move(set); }

std::span<const backend::BackendEntry> backends() { return kTable; }

}  // namespace devdl::test::fake
