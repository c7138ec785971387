// One libFuzzer target per parser, selected at build time by DEVDL_FUZZ_PARSER. Every input
// must be read or refused with an error: no crash, no out-of-bounds read (ASan), no leak. The
// SPIR-V, device ELF and PTX targets also make the input's definitions local, as interposition
// does to a copy it links (image/local_definitions.h); the PTX and fatbin targets read what the
// code refers to, as a link split into parts plans them (backend/cuda/program_parts.h). The Link target takes the input further,
// along the path device_dlopen(DEVDL_NOW) takes up to the driver.
#include "backend/cuda/program_parts.h"
#include "backend/opencl/host_variables.h"
#include "backend/spirv/copy_kernels.h"
#include "backend/spirv/link.h"
#include "backend/spirv/program_part.h"
#include "backend/spirv/place_variables.h"
#include "backend/spirv/translation.h"
#include "bundle/host_elf.h"
#include "store/disk_cache.h"
#include "store/image_summary.h"
#include "image/aspects.h"
#include "image/code_graph.h"
#include "image/instance_cells.h"
#include "image/registered_objects.h"
#include "image/local_definitions.h"
#include "image/read_image.h"
#include "image/readers.h"
#include "image/virtual_functions.h"
#include "resolve/link_plan.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string_view>
#include <vector>

namespace {

enum Parser { SpirV, DeviceElf, Ptx, Fatbin, Bitcode, Bundle, HostElf, AnyFile, CacheEntry, Summary, Link, CudaRegister };

// A disk cache entry as a file under the key "fuzz" (tests/data/fuzz-seeds has a valid
// one to start from), then looked up and listed as devdl and devdl-cache do.
void readCacheEntry(devdl::Bytes bytes) {
  using namespace devdl::store;
  static const std::string dir = [] {
    char name[] = "/tmp/devdl-fuzz-cache-XXXXXX";
    return std::string(mkdtemp(name));
  }();
  static const Key key = KeyBuilder().add("fuzz").finish();
  const std::string path = dir + "/" + key.hex() + ".devdl-cache";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) std::abort();
  close(fd);
  DiskCache cache(dir, uint64_t(1) << 30);
  if (!cache.list()) std::abort();  // the directory is there and readable
  cache.load(key);
  // The bytes as the binary of an entry the OpenCL backend stored (tests/data/fuzz-seeds has one),
  // and as the CUDA backend's program of several modules.
  llvm::consumeError(devdl::backend::opencl::readStoredProgram(devdl::asText(bytes)).takeError());
  llvm::consumeError(devdl::backend::cuda::unpackModules(devdl::asText(bytes)).takeError());
}

// The bytes as an image file's summary (store/image_summary.h) come out of a disk cache entry
// (tests/data/fuzz-seeds has one), of a file that holds these very bytes: each image it gives
// then read from the file, as when it is linked.
llvm::Error readSummary(devdl::Bytes bytes) {
  using namespace devdl;
  static const std::string path = [] {
    char name[] = "/tmp/devdl-fuzz-summary-XXXXXX";
    close(mkstemp(name));
    return std::string(name);
  }();
  const int fd = open(path.c_str(), O_WRONLY | O_TRUNC);
  if (fd < 0 || write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) std::abort();
  close(fd);
  auto file = RegularFile::open(path);
  if (!file) std::abort();
  store::Entry entry;
  entry.file = llvm::MemoryBuffer::getMemBufferCopy(std::string(store::Entry::kHeaderSize, '\0') + std::string(asText(bytes)));
  entry.binarySize = bytes.size();
  auto images = store::imagesOfSummary(std::move(entry), std::make_shared<const RegularFile>(std::move(*file)));
  if (!images) return images.takeError();
  for (const DeviceImage &image : images->images) llvm::consumeError(readUnread(image).takeError());
  return llvm::Error::success();
}

// Reads an image of `format`, then makes its definitions local in a copy (a name it does not
// define where it has none), and reaches its variables and imports through cells in another: the
// edits parse the bytes themselves, read or not. An image read (SPIR-V: validated) whose cells
// were made must read again: the edit must not make a valid module invalid.
llvm::Error readAndHide(devdl::Bytes bytes, devdl::ImageFormat format, std::shared_ptr<devdl::Storage> storage,
                        bool *vouched = nullptr) {
  using namespace devdl;
  auto image = readRawImage(bytes, format, storage);
  // As the link path: a module the validator could not vouch for is made local by devdl's own
  // reading alone, and never rewritten with SPIRV-Tools (cells) nor cut into parts.
  const bool unvouched = image && !image->unvalidated.empty();
  if (vouched) *vouched = image && !unvouched;
  std::vector<std::string_view> names{"f"}, reached{"v"};
  if (image)
    for (const Symbol &s : image->symbols) {
      if (s.kind == SymbolKind::Function || s.kind == SymbolKind::Variable) names.push_back(s.name);
      if (s.kind == SymbolKind::Variable || s.kind == SymbolKind::Import) reached.push_back(s.name);
    }
  llvm::consumeError(withLocalDefinitions(bytes, format, names).takeError());
  if (unvouched) return image.takeError();
  auto cells = withInstancesElsewhere(bytes, format, reached);
  if (image && cells && !readRawImage(asBytes(*cells), format, storage)) __builtin_trap();
  if (!cells) llvm::consumeError(cells.takeError());
  return image.takeError();
}

// A bundle's images, then what their property sets say as the loader and the tools read them:
// the aspects they need, their virtual-function sets, and for each property name the device
// global and the specialization constant's parts a unique id would map to.
llvm::Error readBundleAndProperties(devdl::Bytes bytes, std::shared_ptr<devdl::Storage> storage) {
  using namespace devdl;
  auto images = readBundleImages(bytes, std::move(storage));
  if (!images) return images.takeError();
  for (const DeviceImage &image : *images) {
    llvm::consumeError(requiredAspects(image).takeError());
    const VirtualFunctions vf = virtualFunctionsOf(image);
    (void)vf;
    for (const PropertySet &set : image.propertySets)
      for (const Property &p : set.properties) {
        (void)deviceGlobalOf(image, p.name);
        (void)specConstantPartsOf(image, p.name);
        (void)declaresSpecId(p, 3);
      }
  }
  return llvm::Error::success();
}

// A file (loose image, bundle, host ELF) linked as device_dlopen(DEVDL_NOW) links it on PoCL:
// the first image's plan over the file's SPIR-V images (the first definition of a name wins, the
// others made local), each image checked before it is linked, the SPIRV-Tools link, the
// translation to SPIR and the optimization across images, and that optimization written back as
// SPIR-V as for a device that takes IL. Only the driver's build is left out.
llvm::Error link(devdl::Bytes bytes, std::shared_ptr<devdl::Storage> storage) {
  using namespace devdl;
  auto file = readImageMemory(bytes, "fuzz", std::move(storage));
  if (!file) return file.takeError();
  std::vector<const DeviceImage *> images;
  for (const DeviceImage &image : file->images)
    if (image.format == ImageFormat::SpirV) images.push_back(&image);
  if (images.empty()) return llvm::Error::success();
  const uint32_t roots[] = {0};
  const LinkPlan plan = computeLinkPlan(roots, images, [&](std::string_view symbol, uint32_t) -> std::optional<uint32_t> {
    for (uint32_t id = 0; id < images.size(); ++id)
      for (const Symbol &s : images[id]->symbols)
        if (s.name == symbol && s.kind != SymbolKind::Import) return id;
    return std::nullopt;
  });
  if (!plan.unresolved.empty() || !plan.conflicts.empty()) return llvm::Error::success();
  std::deque<std::string> edited;
  std::deque<DeviceImage> copies;
  std::vector<const DeviceImage *> linked;
  std::vector<std::string> labels;
  for (size_t i = 0; i < plan.images.size(); ++i) {
    // As the link path: each image as its reader leaves it, and devdl's own SPIR-V processing
    // takes only what its validator vouches for.
    auto checked = checkImage(*images[plan.images[i]]);
    if (!checked) return checked.takeError();
    const DeviceImage &image = *checked ? copies.emplace_back(std::move(**checked)) : *images[plan.images[i]];
    if (!image.unvalidated.empty() || !images[plan.images[i]]->unvalidated.empty()) return llvm::Error::success();
    linked.push_back(&image);
    labels.push_back("image " + std::to_string(plan.images[i]));
    if (plan.interposed[i].empty()) continue;
    auto local = withLocalDefinitions(image.bytes, image.format, plan.interposed[i]);
    if (!local) return local.takeError();
    DeviceImage &copy = copies.emplace_back(image);
    copy.bytes = asBytes(edited.emplace_back(std::move(*local)));
    linked.back() = &copy;
  }
  auto words = backend::linkSpirv(linked, labels);
  if (!words) return words.takeError();
  llvm::consumeError(backend::inProcess::optimizeSpirv(*words).takeError());
  // Its variables moved to host memory, as for PoCL, to an address nothing runs at.
  auto place = [](const backend::VariableLayout &) -> llvm::Expected<uint64_t> { return 0x566000000000; };
  if (llvm::Error err = backend::inProcess::spirvToSpir(*words, {}, /*optimize=*/true, place).takeError()) return err;
  // And the copy kernels of the first image's variables, as a device that gives no variable
  // addresses links them.
  std::vector<std::string> variables;
  for (const Symbol &s : linked.front()->symbols)
    if (s.kind == SymbolKind::Variable) variables.emplace_back(s.name);
  if (!variables.empty()) {
    std::vector<uint32_t> first(linked.front()->bytes.size() / 4);
    std::memcpy(first.data(), linked.front()->bytes.data(), first.size() * 4);
    llvm::consumeError(backend::inProcess::copyKernels(first, variables).takeError());
  }
  // Linked again as a program that reaches every variable of the plan in another, its statics
  // exported first: each image that defines or imports one through its cell, and an interposed
  // one through its own, translated as for PoCL.
  std::vector<std::string_view> reachedNames;
  std::vector<std::vector<std::string>> exported(plan.images.size());
  for (size_t i = 0; i < plan.images.size(); ++i) {
    const DeviceImage &image = *images[plan.images[i]];
    for (const Symbol &s : image.symbols)
      if (s.kind == SymbolKind::Variable && !llvm::is_contained(plan.interposed[i], s.name)) reachedNames.push_back(s.name);
    for (std::string_view name : image.statics) exported[i].push_back(staticExportName(name, i));
  }
  for (const std::vector<std::string> &names : exported) reachedNames.insert(reachedNames.end(), names.begin(), names.end());
  if (reachedNames.empty()) return llvm::Error::success();
  std::deque<DeviceImage> reaching;
  std::vector<const DeviceImage *> reached;
  for (size_t i = 0; i < plan.images.size(); ++i) {
    const DeviceImage &image = *images[plan.images[i]];
    auto bytes = editedForLink(image.bytes, image.format, image.statics, exported[i], plan.interposed[i], reachedNames,
                               plan.interposed[i], i, edited);
    if (!bytes) return bytes.takeError();
    reached.push_back(&reaching.emplace_back(image));
    reaching.back().bytes = *bytes;
  }
  auto cells = backend::linkSpirv(reached, labels);
  if (!cells) return cells.takeError();
  return backend::inProcess::spirvToSpir(*cells, {}, /*optimize=*/true, place).takeError();
}

llvm::Error parse(devdl::Bytes bytes) {
  using namespace devdl;
  auto storage = std::make_shared<Storage>();
  switch (Parser::DEVDL_FUZZ_PARSER) {
    case SpirV: {
      // What a link in parts reads of a module, and each part's cut of one the reader accepts
      // (a link cuts only modules read and validated).
      auto graph = readers::spirvCodeGraph(bytes);
      bool vouched = false;
      llvm::Error read = readAndHide(bytes, ImageFormat::SpirV, storage, &vouched);
      if (graph && !read && vouched) {
        const std::vector<ProgramPart> parts = partitionKernels({&*graph, 1}, 2);
        std::vector<uint32_t> words(bytes.size() / 4);
        std::memcpy(words.data(), bytes.data(), words.size() * 4);
        for (size_t p = 0; p < parts.size(); ++p)
          llvm::consumeError(backend::spirvForPart(words, parts, p, {}).takeError());
      }
      if (!graph) llvm::consumeError(graph.takeError());
      return read;
    }
    case DeviceElf: return readAndHide(bytes, ImageFormat::Cubin, storage);
    case Ptx:
      llvm::consumeError(readers::ptxCodeGraph(bytes).takeError());
      return readAndHide(bytes, ImageFormat::Ptx, storage);
    case Fatbin: {
      llvm::consumeError(readers::splitFatbins(bytes).takeError());
      const std::string label = "fuzz";
      const backend::cuda::JitInput input{backend::cuda::JitInputKind::Fatbin, bytes, &label};
      backend::cuda::planLtoParts({&input, 1}, 90, 4, nullptr);
      return readRawImage(bytes, ImageFormat::Fatbin, storage).takeError();
    }
    case Bitcode: return readRawImage(bytes, ImageFormat::SpirBitcode, storage).takeError();
    case Bundle: return readBundleAndProperties(bytes, storage);
    case HostElf: return bundle::findBundlesInElf(bytes).takeError();
    case AnyFile: return readImageMemory(bytes, "fuzz", storage).takeError();
    case CacheEntry: readCacheEntry(bytes); return llvm::Error::success();
    case Summary: return readSummary(bytes);
    case Link: return link(bytes, storage);
    // What devdl-pack --cuda-register reads of its objects and static libraries: the module ids
    // it writes into the registration object's C source.
    case CudaRegister: return bundle::cudaModuleIds(bytes).takeError();
  }
  return llvm::Error::success();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::consumeError(parse(devdl::Bytes(data, size)));
  return 0;
}
