#include "backend/cuda/nvjitlink.h"
#include "backend/cuda/link_log.h"
#include "backend/cuda/toolkit.h"
#include "support/driver_library.h"
#include "support/environment.h"
#include "support/error.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringRef.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace devdl::backend::cuda {

namespace {

// nvJitLink.h's types, declared here so that building devdl needs no CUDA toolkit.
using nvJitLinkHandle = struct nvJitLink *;
using nvJitLinkResult = int;
enum nvJitLinkInputType : int { NVJITLINK_INPUT_CUBIN = 1, NVJITLINK_INPUT_PTX = 2, NVJITLINK_INPUT_FATBIN = 4 };
constexpr nvJitLinkResult kUnrecognizedOption = 1, kIncompatibleOptions = 10;

struct JitApi {
  nvJitLinkResult (*create)(nvJitLinkHandle *, uint32_t, const char *const *) = nullptr;
  nvJitLinkResult (*destroy)(nvJitLinkHandle *) = nullptr;
  nvJitLinkResult (*addData)(nvJitLinkHandle, nvJitLinkInputType, const void *, size_t, const char *) = nullptr;
  nvJitLinkResult (*complete)(nvJitLinkHandle) = nullptr;
  nvJitLinkResult (*cubinSize)(nvJitLinkHandle, size_t *) = nullptr;
  nvJitLinkResult (*cubin)(nvJitLinkHandle, void *) = nullptr;
  nvJitLinkResult (*errorLogSize)(nvJitLinkHandle, size_t *) = nullptr;
  nvJitLinkResult (*errorLog)(nvJitLinkHandle, char *) = nullptr;
  nvJitLinkResult (*infoLogSize)(nvJitLinkHandle, size_t *) = nullptr;
  nvJitLinkResult (*infoLog)(nvJitLinkHandle, char *) = nullptr;
  nvJitLinkResult (*version)(unsigned *, unsigned *) = nullptr;  // CUDA 12.3 and later
};

struct Loaded {
  JitApi api;
  std::string error;  // empty when usable
};

// The entry points of the library at `file.path`, loaded once per path for the process.
const Loaded &load(const NvJitLinkFile &file) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Loaded>> loaded;
  std::lock_guard lock(mutex);
  auto &slot = loaded[file.path];
  if (slot) return *slot;
  slot = std::make_unique<Loaded>();
  JitApi &api = slot->api;
  // nvJitLink.h maps each name to a symbol of the library's major version: __nvJitLinkCreate_13_0.
  const std::string suffix = "_" + std::to_string(file.major) + "_0";
  const std::string names[] = {"__nvJitLinkCreate", "__nvJitLinkDestroy", "__nvJitLinkAddData",
                               "__nvJitLinkComplete", "__nvJitLinkGetLinkedCubinSize", "__nvJitLinkGetLinkedCubin",
                               "__nvJitLinkGetErrorLogSize", "__nvJitLinkGetErrorLog", "__nvJitLinkGetInfoLogSize",
                               "__nvJitLinkGetInfoLog"};
  std::vector<std::string> symbols;
  for (const std::string &name : names) symbols.push_back(name + suffix);
  const EntryPoint entries[] = {
      {symbols[0].c_str(), reinterpret_cast<void **>(&api.create)},
      {symbols[1].c_str(), reinterpret_cast<void **>(&api.destroy)},
      {symbols[2].c_str(), reinterpret_cast<void **>(&api.addData)},
      {symbols[3].c_str(), reinterpret_cast<void **>(&api.complete)},
      {symbols[4].c_str(), reinterpret_cast<void **>(&api.cubinSize)},
      {symbols[5].c_str(), reinterpret_cast<void **>(&api.cubin)},
      {symbols[6].c_str(), reinterpret_cast<void **>(&api.errorLogSize)},
      {symbols[7].c_str(), reinterpret_cast<void **>(&api.errorLog)},
      {symbols[8].c_str(), reinterpret_cast<void **>(&api.infoLogSize)},
      {symbols[9].c_str(), reinterpret_cast<void **>(&api.infoLog)},
      {"nvJitLinkVersion", reinterpret_cast<void **>(&api.version), true},
  };
  slot->error = openDriverLibrary(file.path.c_str(), "nvJitLink", "nvJitLink of CUDA 12 or later", entries);
  return *slot;
}

llvm::Expected<const JitApi &> api(const NvJitLinkFile &file) {
  const Loaded &loaded = load(file);
  if (!loaded.error.empty()) return fail(ErrorCode::NotFound, loaded.error);
  return loaded.api;
}

// The file at `path` if it is a regular one, identified by its size and modification time.
std::optional<NvJitLinkFile> fileAt(const std::string &path, int major) {
  auto identity = fileIdentity(path);
  if (!identity) return std::nullopt;
  return NvJitLinkFile{path, major, "nvJitLink " + *identity};
}

}  // namespace

std::optional<NvJitLinkFile> findNvJitLink() {
  if (const char *named = devdlVariable("DEVDL_NVJITLINK"); named && *named) {
    // The major version from the name (libnvJitLink.so.12.4.127 is 12), else the newest devdl knows.
    llvm::StringRef version = llvm::StringRef(named).rsplit(".so.").second;
    int major = 13;
    if (!version.empty()) version.split('.').first.getAsInteger(10, major);
    return fileAt(named, major);
  }
  const std::vector<std::string> directories = toolkitLibraryDirectories();
  for (int major : {13, 12})
    for (const std::string &dir : directories)
      if (auto file = fileAt(dir + "/libnvJitLink.so." + std::to_string(major), major)) return file;
  return std::nullopt;
}

namespace {

std::vector<std::string> optionList(int sm, bool lto) {
  std::vector<std::string> options = {"-arch=sm_" + std::to_string(sm)};
  if (lto) options.push_back("-lto");
  return options;
}

}  // namespace

std::string nvJitLinkOptions(int sm, bool lto) { return llvm::join(optionList(sm, lto), " "); }

llvm::Expected<std::string> nvJitLinkVersion(const NvJitLinkFile &file) {
  auto loaded = api(file);
  if (!loaded) return loaded.takeError();
  unsigned major = 0, minor = 0;
  if (!loaded->version || loaded->version(&major, &minor) != 0) return std::string();
  return std::to_string(major) + "." + std::to_string(minor);
}

namespace {

// One nvJitLink handle, destroyed with this object, and what it logs.
class JitLink {
 public:
  explicit JitLink(const JitApi &jit) : jit_(jit) {}
  JitLink(const JitLink &) = delete;
  JitLink &operator=(const JitLink &) = delete;
  ~JitLink() {
    if (handle_) jit_.destroy(&handle_);
  }

  // nvJitLinkCreate for `sm`, -lto where `lto`, with -no-cache and `more` (-time where `timed`); an
  // nvJitLink that refuses one of those links without them.
  llvm::Error create(int sm, bool lto, std::span<const std::string> more, bool timed) {
    const std::vector<std::string> given = optionList(sm, lto);
    std::vector<const char *> options;
    for (const std::string &option : given) options.push_back(option.c_str());
    const size_t required = options.size();
    options.push_back("-no-cache");
    for (const std::string &option : more) options.push_back(option.c_str());
    if (timed) options.push_back("-time");
    nvJitLinkResult err = jit_.create(&handle_, options.size(), options.data());
    if (err == kUnrecognizedOption || err == kIncompatibleOptions) err = jit_.create(&handle_, required, options.data());
    if (err != 0)
      return fail(ErrorCode::Unsupported, "nvJitLinkCreate (" + nvJitLinkOptions(sm, lto) + ") failed: error " +
                                              llvm::Twine(err));
    return llvm::Error::success();
  }

  llvm::Error add(const JitInput &input) {
    const nvJitLinkInputType type = input.kind == JitInputKind::Cubin ? NVJITLINK_INPUT_CUBIN
                                    : input.kind == JitInputKind::Ptx ? NVJITLINK_INPUT_PTX
                                                                      : NVJITLINK_INPUT_FATBIN;
    nvJitLinkResult err = jit_.addData(handle_, type, input.data.data(), input.data.size(), input.label->c_str());
    if (err == 0) return llvm::Error::success();
    const std::string text = errors();
    return fail(ErrorCode::Unsupported, *input.label + ": nvJitLinkAddData failed: error " + std::to_string(err) +
                                            (text.empty() ? "" : "\n" + text));
  }

  // nvJitLinkComplete; `options` name the link in its error.
  llvm::Error complete(const std::string &options) {
    nvJitLinkResult err = jit_.complete(handle_);
    if (err == 0) return llvm::Error::success();
    const std::string text = errors();
    const bool undefined = text.find("undefined device symbol `") != std::string::npos;
    return fail(undefined ? ErrorCode::Unresolved : ErrorCode::Unsupported,
                (text.empty() ? "" : text + "\n") + "nvJitLinkComplete (" + options + ") failed: error " +
                    std::to_string(err));
  }

  // What -time logged, "nvJitLinkComplete time to create PTX: 490.014008" and the like: one line.
  std::string times() const {
    std::string out;
    llvm::SmallVector<llvm::StringRef, 4> lines;
    const std::string info = read(jit_.infoLogSize, jit_.infoLog);
    llvm::StringRef(info).split(lines, '\n', -1, false);
    for (llvm::StringRef line : lines)
      if (line.contains(" time ")) out += (out.empty() ? "" : "; ") + line.trim().str();
    return out;
  }

  llvm::Expected<std::string> linkedCubin() const {
    size_t size = 0;
    if (nvJitLinkResult err = jit_.cubinSize(handle_, &size); err != 0)
      return fail(ErrorCode::Unsupported, "nvJitLinkGetLinkedCubinSize failed: error " + llvm::Twine(err));
    std::string cubin(size, '\0');
    if (nvJitLinkResult err = jit_.cubin(handle_, cubin.data()); err != 0)
      return fail(ErrorCode::Unsupported, "nvJitLinkGetLinkedCubin failed: error " + llvm::Twine(err));
    return cubin;
  }

 private:
  // Its error log, in devdl's words (describeLinkLog).
  std::string errors() const { return describeLinkLog(read(jit_.errorLogSize, jit_.errorLog)); }

  template <typename Size, typename Get>
  std::string read(Size logSize, Get getLog) const {
    size_t size = 0;
    if (logSize(handle_, &size) != 0 || size == 0) return std::string();
    std::string text(size, '\0');
    if (getLog(handle_, text.data()) != 0) return std::string();
    text.resize(std::strlen(text.c_str()));
    return text;
  }

  const JitApi &jit_;
  nvJitLinkHandle handle_ = nullptr;
};

}  // namespace

llvm::Expected<std::string> linkWithNvJitLink(const NvJitLinkFile &file, std::span<const JitInput> inputs, int sm,
                                              bool lto, std::span<const std::string> more, std::string *times) {
  auto loaded = api(file);
  if (!loaded) return loaded.takeError();
  JitLink link(*loaded);
  if (llvm::Error err = link.create(sm, lto, more, times != nullptr)) return err;
  for (const JitInput &input : inputs)
    if (llvm::Error err = link.add(input)) return err;
  if (llvm::Error err = link.complete(nvJitLinkOptions(sm, lto))) return err;
  if (times) *times = link.times();
  return link.linkedCubin();
}

}  // namespace devdl::backend::cuda
