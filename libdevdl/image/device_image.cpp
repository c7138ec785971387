#include "image/device_image.h"

#include "support/demangle.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace devdl {

namespace {

struct FormatInfo {
  ImageFormat format;
  std::string_view name;
  LinkFamily family;
};

constexpr std::array kFormats = {
    FormatInfo{ImageFormat::Unknown, "unknown", LinkFamily::None},
    FormatInfo{ImageFormat::SpirV, "spirv", LinkFamily::Spirv},
    FormatInfo{ImageFormat::SpirBitcode, "spir-bc", LinkFamily::Spirv},
    FormatInfo{ImageFormat::Cubin, "cubin", LinkFamily::Cuda},
    FormatInfo{ImageFormat::Ptx, "ptx", LinkFamily::Cuda},
    FormatInfo{ImageFormat::Fatbin, "fatbin", LinkFamily::Cuda},
    FormatInfo{ImageFormat::DeviceElf, "elf", LinkFamily::Amdgpu},
    // Linked by OpenCL, with SPIR-V where the device takes both.
    FormatInfo{ImageFormat::OpenClBinary, "opencl-binary", LinkFamily::Spirv},
    FormatInfo{ImageFormat::LtoIr, "ltoir", LinkFamily::Cuda},
    // Linked by Level Zero, with SPIR-V, where the driver takes it.
    FormatInfo{ImageFormat::IntelNative, "intel-native", LinkFamily::Spirv},
};

const FormatInfo &infoOf(ImageFormat format) {
  for (const auto &info : kFormats)
    if (info.format == format) return info;
  return kFormats[0];
}

}  // namespace

std::string_view formatName(ImageFormat format) { return infoOf(format).name; }

std::optional<ImageFormat> formatFromName(std::string_view name) {
  for (const auto &info : kFormats)
    if (info.name == name) return info.format;
  return std::nullopt;
}

LinkFamily linkFamily(ImageFormat format) { return infoOf(format).family; }

char symbolLetter(const Symbol &symbol) {
  switch (symbol.kind) {
    case SymbolKind::Kernel: return 'K';
    case SymbolKind::Function: return 'T';
    case SymbolKind::Variable: return 'D';
    case SymbolKind::Import: return symbol.weak ? 'w' : 'U';
  }
  return '?';
}

std::string_view symbolKindName(SymbolKind kind) {
  switch (kind) {
    case SymbolKind::Kernel: return "kernel";
    case SymbolKind::Function: return "function";
    case SymbolKind::Variable: return "variable";
    case SymbolKind::Import: return "import";
  }
  return "?";
}

std::string_view propertyTypeName(PropertyType type) {
  switch (type) {
    case PropertyType::UInt32: return "u32";
    case PropertyType::ByteArray: return "bytes";
    case PropertyType::String: return "str";
  }
  return "?";
}

const Property *PropertySet::find(std::string_view property) const {
  for (const auto &p : properties)
    if (p.name == property) return &p;
  return nullptr;
}

std::string_view Storage::save(std::string_view s) {
  char *copy = strings_.Allocate<char>(s.size() + 1);
  if (!s.empty()) std::memcpy(copy, s.data(), s.size());  // an empty view's data may be null
  copy[s.size()] = '\0';
  return {copy, s.size()};
}

Bytes Storage::adopt(std::unique_ptr<llvm::MemoryBuffer> buffer) {
  Bytes b = asBytes(std::string_view(buffer->getBufferStart(), buffer->getBufferSize()));
  adopted_.push_back(std::move(buffer));
  return b;
}

std::string DeviceImage::label(size_t index) const {
  std::string s = "image " + std::to_string(index) + " (" + std::string(formatName(format));
  if (!arch.empty()) s += " " + std::string(arch);
  s += ")";
  return s;
}

const PropertySet *DeviceImage::findSet(std::string_view name) const {
  for (const auto &set : propertySets)
    if (set.name == name) return &set;
  return nullptr;
}

PropertySet &DeviceImage::getOrAddSet(std::string_view name) {
  for (auto &set : propertySets)
    if (set.name == name) return set;
  propertySets.push_back({storage->save(name), {}});
  return propertySets.back();
}

void DeviceImage::setProperty(std::string_view set, std::string_view name, uint32_t value) {
  Property p{storage->save(name), PropertyType::UInt32, value, {}};
  auto &props = getOrAddSet(set).properties;
  auto it = std::find_if(props.begin(), props.end(), [&](const Property &q) { return q.name == name; });
  if (it != props.end()) *it = p; else props.push_back(p);
}

void DeviceImage::setProperty(std::string_view set, std::string_view name, PropertyType type,
                              std::string_view data) {
  Property p{storage->save(name), type, 0, storage->save(data)};
  auto &props = getOrAddSet(set).properties;
  auto it = std::find_if(props.begin(), props.end(), [&](const Property &q) { return q.name == name; });
  if (it != props.end()) *it = p; else props.push_back(p);
}

void DeviceImage::ownStrings() {
  triple = storage->save(triple);
  arch = storage->save(arch);
  for (Symbol &s : symbols) s.name = storage->save(s.name);
  for (std::string_view &name : statics) name = storage->save(name);
  if (!unvalidated.empty()) unvalidated = storage->save(unvalidated);
  for (PropertySet &set : propertySets) {
    set.name = storage->save(set.name);
    for (Property &p : set.properties) {
      p.name = storage->save(p.name);
      p.data = storage->save(p.data);
    }
  }
}

namespace {

std::string_view moduleString(const DeviceImage &image, std::string_view name) {
  const PropertySet *set = image.findSet(kModuleSet);
  const Property *property = set ? set->find(name) : nullptr;
  return property && property->type == PropertyType::String ? property->data : std::string_view();
}

std::vector<std::string_view> commaList(std::string_view list) {
  std::vector<std::string_view> items;
  for (std::string_view rest = list; !rest.empty();) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    if (!item.empty()) items.push_back(item);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return items;
}

}  // namespace

std::string_view DeviceImage::moduleId() const { return moduleString(*this, "id"); }

std::vector<std::string_view> DeviceImage::dependencies() const { return commaList(moduleString(*this, "depends")); }

std::vector<std::string_view> DeviceImage::neededFiles() const { return commaList(moduleString(*this, "needed")); }

std::string_view DeviceImage::runPath() const { return moduleString(*this, "runpath"); }

bool isImportableName(std::string_view name) {
  if (name.empty()) return false;
  if (name.starts_with("__") || name.starts_with("llvm.") || name.starts_with(".")) return false;
  // Mangled builtins such as _Z18__spirv_ocl_printfPU3AS2ci: look at the demangled base name.
  if (auto base = mangledBaseName(name); base && base->starts_with("__")) return false;
  return true;
}

bool isDeviceLibraryName(std::string_view name) { return name.starts_with("__devicelib_"); }

std::optional<Symbol> spirImport(std::string_view name) {
  if (isImportableName(name)) return Symbol{name, SymbolKind::Import};
  if (isDeviceLibraryName(name)) return Symbol{name, SymbolKind::Import, /*weak=*/true};
  return std::nullopt;
}

CudaProvider cudaProviderOf(std::string_view name) {
  if (name == "vprintf" || name == "malloc" || name == "free") return CudaProvider::Driver;
  // The device runtime's API (cuda_device_runtime_api.h): its own names, and cuda + a capital.
  if (name.starts_with("__cudaCDP") || (name.size() > 4 && name.starts_with("cuda") && name[4] >= 'A' && name[4] <= 'Z'))
    return CudaProvider::DeviceRuntime;
  return CudaProvider::Image;
}

std::optional<Symbol> cudaImport(std::string_view name) {
  if (cudaProviderOf(name) != CudaProvider::Image) return Symbol{name, SymbolKind::Import, /*weak=*/true};
  if (isImportableName(name)) return Symbol{name, SymbolKind::Import};
  return std::nullopt;
}

std::vector<PropertySet> symbolPropertySets(const DeviceImage &image) {
  PropertySet exported{kExportedSymbolsSet, {}};
  PropertySet imported{kImportedSymbolsSet, {}};
  for (const Symbol &s : image.symbols) {
    if (s.kind == SymbolKind::Function || s.kind == SymbolKind::Variable)
      exported.properties.push_back({s.name, PropertyType::UInt32, 1, {}});
    else if (s.kind == SymbolKind::Import && !s.weak)  // DPC++ links its device libraries apart
      imported.properties.push_back({s.name, PropertyType::UInt32, 1, {}});
  }
  for (PropertySet *set : {&exported, &imported})
    std::sort(set->properties.begin(), set->properties.end(),
              [](const Property &a, const Property &b) { return a.name < b.name; });
  return {std::move(exported), std::move(imported)};
}

}  // namespace devdl
