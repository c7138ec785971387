// devdl-pack: packs device images into a bundle, a relocatable host object, or a copy of an
// existing ELF file; `--check` resolves every import over a list of files, like `ldd -r`.
//
// Image options apply to the input file that follows them (to every image of it, when it is a
// bundle or host file), so that one command packs a library's images with their own settings.
#include "backend/backend.h"
#include "backend/cuda/architecture.h"
#include "backend/registry.h"
#include "backend/spirv/translation.h"
#include "bundle/host_elf.h"
#include "image/aspects.h"
#include "image/registered_objects.h"
#include "image/read_image.h"
#include "image/virtual_functions.h"
#include "loader/files.h"
#include "resolve/symbol_index.h"
#include "support/error.h"
#include "support/own_directory.h"
#include "support/regular_file.h"
#include "support/version.h"
#include "tools/devdl-pack/cuda_register.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Support/ToolOutputFile.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

using namespace devdl;

namespace {

constexpr const char *kUsage = R"(usage: devdl-pack [OUTPUT] [[IMAGE OPTION]... FILE]...
       devdl-pack --check [--arch ARCH | --device] FILE...
       devdl-pack --cuda-register [--cc COMPILER] -o FILE OBJ...
       devdl-pack --help | --version

Packs the device images of each FILE (SPIR-V, SPIR bitcode, cubin, PTX, fatbin, a bundle, or a
host ELF file carrying bundles) into one bundle. Exports, imports, kernels and the target are
derived from each image; image options set or override properties of the FILE that follows them.

Output (one of):
  -o FILE                   write a bundle file (default: a.devdl)
  --object -o FILE          write a relocatable host object to link into an executable or
                            shared library; the process that loads it sees the images
  --target TRIPLE           the object's target (default: this host's)
  --symbol NAME             the object's global symbol at the bundle (default:
                            __devdl_bundle_<hash of the bundle>)
  --add-to ELF -o FILE      write a copy of ELF with the bundle added (readable from the file)

Image options (for the next FILE):
  --module-id ID            devdl/module id
  --depends ID[,ID...]      devdl/module depends: module ids this image needs first
  --needed NAME[,NAME...]   devdl/module needed: files this image needs, by name (as DT_NEEDED),
                            loaded with it and looked for in its run path, DEVDL_LIBRARY_PATH,
                            then <libdir>/devdl
  --runpath DIR[:DIR...]    devdl/module runpath: where its needed files are looked for first (as
                            DT_RUNPATH); $ORIGIN is the directory of the file that holds the
                            image. Each DIR is absolute or starts with $ORIGIN
  --vf-set NAME             SYCL/virtual functions virtual-functions-set
  --calls-vf A[,B...]       SYCL/virtual functions calls-virtual-functions-set
  --creates-vf A[,B...]     SYCL/virtual functions creates-virtual-functions-set
  --dummy-image             SYCL/virtual functions dummy-image=1
  --aspects A[,B...]        SYCL/device requirements aspects (names: fp64, gpu, ...; or numbers)
  --device-global ID=VARIABLE:SIZE
                            SYCL/device globals: the host object registered as ID is VARIABLE
  --spec-constant ID=SPECID:OFFSET:SIZE[,...]
                            SYCL/specialization constants: the host object registered as ID sets
                            these SpecIds from its bytes
  --property SET:NAME=TYPE:VALUE
                            any property; TYPE is u32, str or bytes (hex)
  --opencl-binary-of IMAGE  FILE is a native OpenCL binary (CL_PROGRAM_BINARIES of a program
                            compiled with clCompileProgram) made from IMAGE (SPIR-V or SPIR):
                            it is packed with IMAGE's symbols, as it has no table devdl reads

Check:
  --check FILE...           resolve every import of every image over the files in order, and
                            the files they need (found as the loader finds them, each once,
                            after them); report each unresolved import, needed file not found
                            and duplicate definition; exit 1 if any import is unresolved or a
                            needed file not found
  --arch ARCH               (after --check) answer for a CUDA GPU of that architecture
                            (sm_90): cubins, PTX and fatbins that do not run on it are left
                            out, as the loader passes them over
  --device                  (after --check) answer for the devices devdl would use here
                            (DEVDL_BACKEND, DEVDL_DEVICE): images they do not take are left out

CUDA runtime:
  --cuda-register -o FILE OBJ...
                            write the host object that links the device code of nvcc -rdc=true
                            objects and static libraries at load time, in place of nvcc -dlink's
                            (devdl-pack --cuda-register --help)
)";

[[noreturn]] void usageError(const std::string &message) {
  llvm::errs() << "devdl-pack: " << message << "\n(devdl-pack --help shows the usage)\n";
  std::exit(1);
}

void reportError(llvm::Error err) {
  llvm::errs() << "devdl-pack: " << llvm::toString(std::move(err)) << '\n';
}

// A native OpenCL binary, with the symbols and target of the one image of `source` (what it was
// compiled from): a driver's binary has no symbol table devdl can read.
llvm::Expected<ImageFile> readOpenClBinary(const std::string &path, const std::string &source) {
  auto from = readImageFile(source);
  if (!from) return from.takeError();
  if (from->images.size() != 1 ||
      (from->images[0].format != ImageFormat::SpirV && from->images[0].format != ImageFormat::SpirBitcode))
    return inFile(fail(ErrorCode::InvalidArgument,
                       "--opencl-binary-of needs one SPIR-V or SPIR image, the binary's source"),
                  source);
  auto buffer = llvm::MemoryBuffer::getFile(path, false, false);
  if (!buffer) return inFile(fail(ErrorCode::NotFound, buffer.getError().message()), path);
  if ((*buffer)->getBufferSize() == 0) return inFile(fail(ErrorCode::BadFormat, "empty file"), path);
  auto storage = std::make_shared<Storage>(std::move(*buffer));
  DeviceImage image;
  image.format = ImageFormat::OpenClBinary;
  image.bytes = storage->bytes();
  image.triple = storage->save(from->images[0].triple);
  for (const Symbol &symbol : from->images[0].symbols) image.symbols.push_back({storage->save(symbol.name), symbol.kind});
  image.storage = std::move(storage);
  ImageFile file{path, {}, {}};
  file.images.push_back(std::move(image));
  return file;
}

using Edit = std::function<llvm::Error(DeviceImage &)>;

Edit setString(std::string set, std::string name, std::string value) {
  return [=](DeviceImage &image) {
    image.setProperty(set, name, PropertyType::String, value);
    return llvm::Error::success();
  };
}

// --property SET:NAME=TYPE:VALUE; the set name may itself contain ':' (never '='), so split at
// the last ':' before '='.
llvm::Expected<Edit> parseProperty(std::string_view spec) {
  const size_t eq = spec.find('=');
  const size_t colon = eq == std::string_view::npos ? eq : spec.rfind(':', eq);
  const size_t typeEnd = eq == std::string_view::npos ? eq : spec.find(':', eq);
  if (colon == std::string_view::npos || typeEnd == std::string_view::npos || colon == 0 ||
      colon + 1 == eq)
    return fail(ErrorCode::InvalidArgument,
                "--property " + llvm::Twine(spec) + ": expected SET:NAME=TYPE:VALUE");
  std::string set(spec.substr(0, colon)), name(spec.substr(colon + 1, eq - colon - 1));
  std::string type(spec.substr(eq + 1, typeEnd - eq - 1)), value(spec.substr(typeEnd + 1));
  if (type == "str") return setString(set, name, value);
  if (type == "u32") {
    unsigned long long v;
    if (llvm::StringRef(value).getAsInteger(0, v) || v > UINT32_MAX)
      return fail(ErrorCode::InvalidArgument, "--property " + llvm::Twine(spec) + ": bad u32 value");
    return Edit([=](DeviceImage &image) {
      image.setProperty(set, name, static_cast<uint32_t>(v));
      return llvm::Error::success();
    });
  }
  if (type == "bytes") {
    std::string bytes;
    for (size_t i = 0; i < value.size(); i += 2) {
      unsigned v;
      if (i + 1 == value.size() || llvm::StringRef(value).substr(i, 2).getAsInteger(16, v))
        return fail(ErrorCode::InvalidArgument, "--property " + llvm::Twine(spec) + ": bad hex value");
      bytes += static_cast<char>(v);
    }
    return Edit([=](DeviceImage &image) {
      image.setProperty(set, name, PropertyType::ByteArray, bytes);
      return llvm::Error::success();
    });
  }
  return fail(ErrorCode::InvalidArgument,
              "--property " + llvm::Twine(spec) + ": type must be u32, str or bytes");
}

// Aspects as the seed stores them: a byte array of little-endian uint32 values; each given by
// name (fp64) or number (6).
llvm::Expected<Edit> parseAspects(std::string_view list) {
  std::string bytes;
  for (llvm::StringRef item : llvm::split(llvm::StringRef(list.data(), list.size()), ',')) {
    const std::optional<uint32_t> number = aspectNumber(std::string_view(item.data(), item.size()));
    if (!number)
      return fail(ErrorCode::InvalidArgument,
                  "--aspects " + llvm::Twine(list) + ": `" + item + "` is neither an aspect's name nor a number");
    const uint32_t v = *number;
    for (int shift = 0; shift < 32; shift += 8) bytes += static_cast<char>((v >> shift) & 0xff);
  }
  return Edit([=](DeviceImage &image) {
    image.setProperty(kDeviceRequirementsSet, "aspects", PropertyType::ByteArray, bytes);
    return llvm::Error::success();
  });
}

// Little-endian uint32 values, as the seed's byte arrays hold them.
std::string words(std::initializer_list<uint32_t> values) {
  std::string bytes;
  for (uint32_t v : values)
    for (int shift = 0; shift < 32; shift += 8) bytes += static_cast<char>((v >> shift) & 0xff);
  return bytes;
}

// --device-global ID=VARIABLE:SIZE: SYCL/device globals, property ID: size, device_image_scope 0,
// then the variable's name (devdl's: DPC++ names the variable by the id).
llvm::Expected<Edit> parseDeviceGlobal(std::string_view spec) {
  const auto [id, rest] = llvm::StringRef(spec.data(), spec.size()).split('=');
  const auto [variable, sizeText] = rest.rsplit(':');
  unsigned size = 0;
  if (id.empty() || variable.empty() || sizeText.getAsInteger(0, size))
    return fail(ErrorCode::InvalidArgument, "--device-global " + llvm::Twine(spec) + ": expected ID=VARIABLE:SIZE");
  const std::string bytes = words({size, 0}) + variable.str();
  return Edit([=, id = id.str()](DeviceImage &image) {
    image.setProperty(kDeviceGlobalsSet, id, PropertyType::ByteArray, bytes);
    return llvm::Error::success();
  });
}

// --spec-constant ID=SPECID:OFFSET:SIZE[,...]: SYCL/specialization constants, property ID: the
// triples, one for each scalar of the host object's value.
llvm::Expected<Edit> parseSpecConstant(std::string_view spec) {
  const auto [id, list] = llvm::StringRef(spec.data(), spec.size()).split('=');
  std::string bytes;
  for (llvm::StringRef triple : llvm::split(list, ',')) {
    llvm::SmallVector<llvm::StringRef, 3> parts;
    triple.split(parts, ':');
    unsigned specId = 0, offset = 0, size = 0;
    if (id.empty() || parts.size() != 3 || parts[0].getAsInteger(0, specId) || parts[1].getAsInteger(0, offset) ||
        parts[2].getAsInteger(0, size))
      return fail(ErrorCode::InvalidArgument,
                  "--spec-constant " + llvm::Twine(spec) + ": expected ID=SPECID:OFFSET:SIZE[,SPECID:OFFSET:SIZE...]");
    bytes += words({specId, offset, size});
  }
  return Edit([=, id = id.str()](DeviceImage &image) {
    image.setProperty(kSpecConstantsSet, id, PropertyType::ByteArray, bytes);
    return llvm::Error::success();
  });
}

llvm::Error writeOutput(const std::string &path, std::string_view data) {
  std::error_code ec;
  llvm::ToolOutputFile out(path, ec, llvm::sys::fs::OF_None);
  if (ec) return inFile(fail(ErrorCode::Io, ec.message()), path);
  out.os() << llvm::StringRef(data.data(), data.size());
  out.os().close();
  if (out.os().has_error()) {
    out.os().clear_error();
    return inFile(fail(ErrorCode::Io, "write failed"), path);
  }
  out.keep();
  return llvm::Error::success();
}

// --needed's value, as recorded: file names, without a slash (where they are is the run path's).
std::string neededNames(const std::string &list) {
  llvm::SmallVector<llvm::StringRef, 4> names;
  llvm::StringRef(list).split(names, ',', -1, /*KeepEmpty=*/false);
  if (names.empty()) usageError("--needed needs at least one file name");
  for (llvm::StringRef name : names)
    if (name.contains('/'))
      usageError("--needed " + name.str() + ": a file name without a slash (--runpath says where it is)");
  return llvm::join(names, ",");
}

// --runpath's value: each directory absolute or from $ORIGIN, as the loader never looks in the
// current directory.
std::string runPath(const std::string &list) {
  llvm::SmallVector<llvm::StringRef, 4> dirs;
  llvm::StringRef(list).split(dirs, ':', -1, /*KeepEmpty=*/false);
  if (dirs.empty()) usageError("--runpath needs at least one directory");
  for (llvm::StringRef dir : dirs)
    if (!dir.startswith("/") && !dir.startswith("$ORIGIN") && !dir.startswith("${ORIGIN}"))
      usageError("--runpath " + dir.str() + ": a directory is absolute or starts with $ORIGIN");
  return llvm::join(dirs, ":");
}

// For whom --check answers: any device (each image links with its own family), a CUDA GPU of
// one architecture, or the devices devdl would use on this machine.
struct Target {
  enum { Any, Arch, Devices } kind = Any;
  std::string arch;
  int sm = 0;
  std::unique_ptr<backend::Devices> devices;

  /// Whether the target takes `image`; when not, why.
  bool takes(const DeviceImage &image, std::string &why) const {
    if (kind == Arch) {
      if (linkFamily(image.format) != LinkFamily::Cuda) {
        why = "not a CUDA image";
        return false;
      }
      if (backend::cuda::runsOn(image.format, image.arch, sm)) return true;
      why = std::string(formatName(image.format)) + " for " + std::string(image.arch) + " does not run on " + arch;
      return false;
    }
    if (kind == Devices) {
      auto device = devices->forImage(image);
      llvm::Error refused = device ? (*device)->accepts(image) : device.takeError();
      if (!refused) return true;
      why = llvm::toString(std::move(refused));
      return false;
    }
    return true;
  }
};

// --check: an `ldd -r` for device code.
int check(std::vector<std::string> args) {
  Target target;
  while (!args.empty() && (args[0] == "--arch" || args[0] == "--device")) {
    if (target.kind != Target::Any) usageError("--check takes one of --arch and --device");
    if (args[0] == "--device") {
      const char *choice = std::getenv("DEVDL_BACKEND");
      target.kind = Target::Devices;
      target.devices = std::make_unique<backend::Devices>(backend::builtinBackends(), choice ? choice : "");
      args.erase(args.begin());
      continue;
    }
    if (args.size() < 2) usageError("--arch needs a value");
    llvm::StringRef number(args[1]);
    if (!number.consume_front("sm_") || number.getAsInteger(10, target.sm) || target.sm <= 0)
      usageError("--arch " + args[1] + ": expected a CUDA architecture such as sm_90");
    target.kind = Target::Arch;
    target.arch = args[1];
    args.erase(args.begin(), args.begin() + 2);
  }
  const std::vector<std::string> &paths = args;
  if (paths.empty()) usageError("--check needs at least one FILE");
  std::vector<ImageFile> files;
  std::vector<std::pair<dev_t, ino_t>> identities;  // of files: each read once
  // A file listed twice is checked twice (its definitions duplicate themselves); a needed one once.
  auto add = [&](llvm::Expected<RegularFile> opened, bool needed) -> llvm::Error {
    if (!opened) return opened.takeError();
    const std::pair<dev_t, ino_t> identity{opened->status().st_dev, opened->status().st_ino};
    if (needed && llvm::is_contained(identities, identity)) return llvm::Error::success();
    auto file = readImageFile(*opened);
    if (!file) return file.takeError();
    files.push_back(std::move(*file));
    identities.push_back(identity);
    return llvm::Error::success();
  };
  for (const std::string &path : paths)
    if (llvm::Error err = add(RegularFile::open(path), /*needed=*/false)) {
      reportError(std::move(err));
      return 1;
    }
  // Then the files they need, breadth first, found as the loader finds them (loader/files.h).
  bool neededMissing = false;
  for (size_t f = 0; f < files.size(); ++f)
    for (size_t i = 0; i < files[f].images.size(); ++i) {
      const std::string needer = files[f].name, runPath(files[f].images[i].runPath());
      std::vector<std::string> names;
      for (std::string_view name : files[f].images[i].neededFiles()) names.emplace_back(name);
      for (const std::string &name : names) {
        const Needer from{needer, true, runPath};
        auto opened = openNamedFile(name.c_str(), &from);
        if (opened) llvm::errs() << "devdl-pack: note: " << needer << " needs " << name << ": " << opened->path() << "\n";
        if (llvm::Error err = add(std::move(opened), /*needed=*/true)) {
          const bool missing = hasCode(err, ErrorCode::NotFound);
          reportError(std::move(err));
          if (!missing) return 1;  // a file that cannot be read
          neededMissing = true;
        }
      }
    }
  std::vector<const DeviceImage *> images;
  std::vector<std::pair<const ImageFile *, size_t>> origin;  // file and index within it
  for (const ImageFile &file : files)
    for (size_t i = 0; i < file.images.size(); ++i) {
      images.push_back(&file.images[i]);
      origin.emplace_back(&file, i);
    }
  auto where = [&](uint32_t image) {
    auto [file, index] = origin[image];
    return file->name + ": " + images[image]->label(index);
  };
  std::vector<bool> taken;
  for (uint32_t i = 0; i < images.size(); ++i) {
    if (!images[i]->unvalidated.empty())
      llvm::errs() << "devdl-pack: note: " << where(i) << ": not validated (SPIRV-Tools could not vouch for it: "
                   << images[i]->unvalidated << "): only a driver that takes SPIR-V itself links it\n";
    std::string why;
    taken.push_back(target.takes(*images[i], why));
    if (!taken.back()) llvm::errs() << "devdl-pack: note: " << where(i) << ": left out: " << why << "\n";
  }
  const LinkCheck result = checkLinks(images, [&](uint32_t i) { return taken[i]; });
  // Virtual-function sets (seed 003): a set's images define the same names on purpose (its
  // dummy, or the set held in several files); the loader takes them by set, not by search order.
  std::vector<VirtualFunctions> sets;
  std::set<std::string_view> held;
  for (uint32_t i = 0; i < images.size(); ++i) {
    sets.push_back(virtualFunctionsOf(*images[i]));
    if (taken[i] && !sets.back().set.empty() && !sets.back().dummy) held.insert(sets.back().set);
  }
  for (const auto &d : result.duplicates)
    if (sets[d.first].set.empty() || sets[d.second].set.empty())
      llvm::errs() << "devdl-pack: warning: " << where(d.second) << ": duplicate definition of `"
                   << d.symbol << "` (the one in " << where(d.first) << " is used)\n";
  for (const auto &u : result.unresolved)
    llvm::errs() << "devdl-pack: " << where(u.image) << ": undefined device symbol `" << u.symbol
                 << "`\n";
  bool setMissing = false;
  for (uint32_t i = 0; i < images.size(); ++i) {
    if (!taken[i]) continue;
    for (std::string_view set : sets[i].calls)
      if (!held.count(set)) {
        llvm::errs() << "devdl-pack: " << where(i) << ": calls virtual functions set " << set
                     << ", which no image holds\n";
        setMissing = true;
      }
    for (std::string_view set : sets[i].creates)
      if (!held.count(set))
        llvm::errs() << "devdl-pack: warning: " << where(i) << ": creates objects of virtual functions set " << set
                     << ", which no image holds\n";
  }
  if (!result.unresolved.empty() || setMissing || neededMissing) return 1;
  size_t imports = 0, weak = 0, checked = 0;
  for (uint32_t i = 0; i < images.size(); ++i) {
    if (!taken[i]) continue;
    ++checked;
    for (const Symbol &s : images[i]->symbols) (s.weak ? weak : imports) += s.kind == SymbolKind::Import;
  }
  llvm::outs() << "devdl-pack: " << checked << " images in " << files.size() << " files: all " << imports
               << " imports resolved";
  if (weak) llvm::outs() << "; " << weak << " weak imports, bound where an image defines them, else the driver's";
  llvm::outs() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  // Installed, this tool is in <bindir> and the device libraries in <libdir>/devdl.
  llvm::SmallString<256> libraries(ownDirectory());
  llvm::sys::path::append(libraries, DEVDL_LIBRARY_DIR_FROM_TOOLS);
  llvm::sys::fs::make_absolute(libraries);
  llvm::sys::path::remove_dots(libraries, /*remove_dot_dot=*/true);
  useDefaultLibraryDirectory(std::string(libraries));
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) usageError("no input files");
  if (args[0] == "--help" || args[0] == "-h") {
    llvm::outs() << kUsage;
    return 0;
  }
  if (args[0] == "--version") {
    llvm::outs() << "devdl-pack (" << devdl::devdlBuild() << ")\n" << devdl::backend::spirTranslationStatement() << "\n";
    return 0;
  }
  if (args[0] == "--check") return check({args.begin() + 1, args.end()});
  if (args[0] == "--cuda-register") return pack::cudaRegister({args.begin() + 1, args.end()});
  if (args[0] == "--arch" || args[0] == "--device") usageError(args[0] + " comes after --check");

  std::string output, addTo, targetTriple, symbol;
  bool object = false;
  std::vector<Edit> pending;
  std::string binaryOf;  // --opencl-binary-of, for the next FILE
  struct Input {
    std::string path;
    std::vector<Edit> edits;
    std::string binaryOf;
  };
  std::vector<Input> inputs;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &arg = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) usageError(arg + " needs a value");
      return args[++i];
    };
    auto take = [&](llvm::Expected<Edit> edit) {
      if (!edit) {
        reportError(edit.takeError());
        std::exit(1);
      }
      pending.push_back(std::move(*edit));
    };
    if (arg == "-o") output = value();
    else if (arg == "--object") object = true;
    else if (arg == "--target") targetTriple = value();
    else if (arg == "--symbol") symbol = value();
    else if (arg == "--add-to") addTo = value();
    else if (arg == "--check") usageError("--check must come first");
    else if (arg == "--module-id") pending.push_back(setString(std::string(kModuleSet), "id", value()));
    else if (arg == "--depends") pending.push_back(setString(std::string(kModuleSet), "depends", value()));
    else if (arg == "--needed") pending.push_back(setString(std::string(kModuleSet), "needed", neededNames(value())));
    else if (arg == "--runpath") pending.push_back(setString(std::string(kModuleSet), "runpath", runPath(value())));
    else if (arg == "--vf-set")
      pending.push_back(setString(std::string(kVirtualFunctionsSet), "virtual-functions-set", value()));
    else if (arg == "--calls-vf")
      pending.push_back(setString(std::string(kVirtualFunctionsSet), "calls-virtual-functions-set", value()));
    else if (arg == "--creates-vf")
      pending.push_back(setString(std::string(kVirtualFunctionsSet), "creates-virtual-functions-set", value()));
    else if (arg == "--dummy-image")
      take(parseProperty(std::string(kVirtualFunctionsSet) + ":dummy-image=u32:1"));
    else if (arg == "--aspects") take(parseAspects(value()));
    else if (arg == "--device-global") take(parseDeviceGlobal(value()));
    else if (arg == "--spec-constant") take(parseSpecConstant(value()));
    else if (arg == "--property") take(parseProperty(value()));
    else if (arg == "--opencl-binary-of") binaryOf = value();
    else if (arg.size() > 1 && arg[0] == '-') usageError("unknown option " + arg);
    else inputs.push_back({arg, std::move(pending), std::move(binaryOf)}), pending.clear(), binaryOf.clear();
  }
  if (inputs.empty()) usageError("no input files");
  if (!pending.empty() || !binaryOf.empty()) usageError("image options after the last input file apply to nothing");
  if (object && !addTo.empty()) usageError("--object and --add-to exclude each other");
  if ((!targetTriple.empty() || !symbol.empty()) && !object)
    usageError("--target and --symbol apply to --object only");
  if (output.empty()) {
    if (object || !addTo.empty()) usageError("-o FILE is required with --object and --add-to");
    output = "a.devdl";
  }

  // The output replacing one of the inputs (by any name of the file) would lose it for a bundle
  // of itself: refused, as cp refuses to copy a file onto itself.
  if (llvm::sys::fs::UniqueID out; !llvm::sys::fs::getUniqueID(output, out))
    for (const auto &[path, edits, source] : inputs)
      for (const std::string &input : {path, source})
        if (llvm::sys::fs::UniqueID in; !input.empty() && !llvm::sys::fs::getUniqueID(input, in) && in == out) {
          reportError(inFile(fail(ErrorCode::InvalidArgument, "is the input " + input + ", which it would replace"), output));
          return 1;
        }

  std::vector<ImageFile> files;
  std::vector<DeviceImage> images;
  for (auto &[path, edits, source] : inputs) {
    auto file = source.empty() ? readImageFile(path) : readOpenClBinary(path, source);
    if (!file) {
      reportError(file.takeError());
      return 1;
    }
    for (size_t i = 0; i < file->images.size(); ++i) {
      DeviceImage &image = file->images[i];
      for (const Edit &edit : edits)
        if (llvm::Error err = edit(image)) {
          reportError(inFile(inImage(std::move(err), image.label(i)), path));
          return 1;
        }
      images.push_back(image);
    }
    files.push_back(std::move(*file));
  }
  const std::string bundle = packImages(images);

  std::string data;
  if (object) {
    if (symbol.empty()) symbol = bundle::defaultBundleSymbol(asBytes(bundle));
    auto made = bundle::makeHostObject(asBytes(bundle), targetTriple, symbol);
    if (!made) {
      reportError(made.takeError());
      return 1;
    }
    data = std::move(*made);
  } else if (!addTo.empty()) {
    auto elf = llvm::MemoryBuffer::getFile(addTo, false, false);
    if (!elf) {
      reportError(inFile(fail(ErrorCode::Io, elf.getError().message()), addTo));
      return 1;
    }
    auto made = bundle::addBundleToElf(asBytes(std::string_view((*elf)->getBufferStart(), (*elf)->getBufferSize())),
                                       asBytes(bundle));
    if (!made) {
      reportError(inFile(made.takeError(), addTo));
      return 1;
    }
    data = std::move(*made);
  } else {
    data = bundle;
  }
  if (llvm::Error err = writeOutput(output, data)) {
    reportError(std::move(err));
    return 1;
  }
  return 0;
}
