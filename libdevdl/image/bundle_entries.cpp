// Images as devdl's bundle entries and back: the keys of an envelope's string table that carry
// an image's format, target, symbols and property sets (docs/bundle-format.md).
#include "image/bundle_entries.h"

#include "image/read_image.h"
#include "support/error.h"

namespace devdl {

namespace {

// devdl's keys in an envelope's string table (docs/bundle-format.md).
constexpr std::string_view kKeyFormat = "devdl.format";
constexpr std::string_view kPropertyPrefix = "devdl.property.";
// The image's statics (DeviceImage::statics), one a line: written, empty or not, for each format
// whose reader lists them, so that a bundle without the key is one packed before they were
// recorded, whose statics are read from the image.
constexpr std::string_view kKeyStatics = "devdl.statics";

bool listsStatics(ImageFormat format) {
  return format == ImageFormat::SpirV || format == ImageFormat::SpirBitcode || format == ImageFormat::Ptx ||
         format == ImageFormat::Cubin || format == ImageFormat::Fatbin;
}

std::vector<std::string_view> lines(std::string_view list) {
  std::vector<std::string_view> out;
  while (!list.empty()) {
    size_t eol = list.find('\n');
    if (std::string_view line = list.substr(0, eol); !line.empty()) out.push_back(line);
    list = eol == std::string_view::npos ? std::string_view() : list.substr(eol + 1);
  }
  return out;
}
struct SymbolKey {
  std::string_view key;
  SymbolKind kind;
  bool weak = false;
};
constexpr SymbolKey kSymbolKeys[] = {
    {"devdl.kernels", SymbolKind::Kernel},
    {"devdl.functions", SymbolKind::Function},
    {"devdl.variables", SymbolKind::Variable},
    {"devdl.imports", SymbolKind::Import},
    {"devdl.weak-imports", SymbolKind::Import, true},
};

ImageFormat formatOfKind(bundle::ImageKind kind, Bytes image) {
  switch (kind) {
    case bundle::ImageKind::Cubin: return ImageFormat::Cubin;
    case bundle::ImageKind::Ptx: return ImageFormat::Ptx;
    case bundle::ImageKind::Fatbinary: return ImageFormat::Fatbin;
    case bundle::ImageKind::Bitcode: return ImageFormat::SpirBitcode;
    default: return sniffFormat(image);
  }
}

bundle::ImageKind kindOfFormat(ImageFormat format) {
  switch (format) {
    case ImageFormat::Cubin: return bundle::ImageKind::Cubin;
    case ImageFormat::Ptx: return bundle::ImageKind::Ptx;
    case ImageFormat::Fatbin: return bundle::ImageKind::Fatbinary;
    case ImageFormat::SpirBitcode: return bundle::ImageKind::Bitcode;
    case ImageFormat::DeviceElf: return bundle::ImageKind::Object;
    default: return bundle::ImageKind::None;  // SPIR-V has no kind before LLVM 21
  }
}

// Property values are one line each: "name<TAB>type<TAB>value", with \\, \n and \t escaped in
// names and strings, and byte arrays in hex.
void escapeInto(std::string &out, std::string_view s) {
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else out += c;
  }
}

std::string encodeProperties(const PropertySet &set) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const Property &p : set.properties) {
    escapeInto(out, p.name);
    out += '\t';
    out += propertyTypeName(p.type);
    out += '\t';
    if (p.type == PropertyType::UInt32) {
      out += std::to_string(p.u32);
    } else if (p.type == PropertyType::String) {
      escapeInto(out, p.data);
    } else {
      for (unsigned char c : p.data) {
        out += kHex[c >> 4];
        out += kHex[c & 15];
      }
    }
    out += '\n';
  }
  return out;
}

llvm::Expected<std::string_view> unescape(std::string_view s, Storage &storage) {
  if (s.find('\\') == std::string_view::npos) return s;
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    if (++i == s.size()) return fail(ErrorCode::BadFormat, "property value ends inside an escape");
    if (s[i] == 'n') out += '\n';
    else if (s[i] == 't') out += '\t';
    else if (s[i] == '\\') out += '\\';
    else return fail(ErrorCode::BadFormat, "unknown escape in property value");
  }
  return storage.save(out);
}

llvm::Error decodeProperties(std::string_view setName, std::string_view text, DeviceImage &image) {
  PropertySet set{setName, {}};
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    if (line.empty()) continue;
    size_t tab1 = line.find('\t'), tab2 = tab1 == std::string_view::npos ? tab1 : line.find('\t', tab1 + 1);
    if (tab2 == std::string_view::npos)
      return fail(ErrorCode::BadFormat, "property set `" + llvm::Twine(setName) +
                                            "`: line is not name, type, value");
    auto name = unescape(line.substr(0, tab1), *image.storage);
    if (!name) return name.takeError();
    std::string_view type = line.substr(tab1 + 1, tab2 - tab1 - 1), value = line.substr(tab2 + 1);
    Property p{*name, PropertyType::UInt32, 0, {}};
    if (type == "u32") {
      p.type = PropertyType::UInt32;
      unsigned long long v;
      if (llvm::StringRef(value.data(), value.size()).getAsInteger(10, v) || v > UINT32_MAX)
        return fail(ErrorCode::BadFormat, "property `" + llvm::Twine(*name) + "`: bad u32 value");
      p.u32 = static_cast<uint32_t>(v);
    } else if (type == "str") {
      p.type = PropertyType::String;
      auto data = unescape(value, *image.storage);
      if (!data) return data.takeError();
      p.data = *data;
    } else if (type == "bytes") {
      p.type = PropertyType::ByteArray;
      if (value.size() % 2)
        return fail(ErrorCode::BadFormat, "property `" + llvm::Twine(*name) + "`: odd hex length");
      std::string bytes;
      for (size_t i = 0; i < value.size(); i += 2) {
        unsigned v;
        if (llvm::StringRef(value.data() + i, 2).getAsInteger(16, v))
          return fail(ErrorCode::BadFormat, "property `" + llvm::Twine(*name) + "`: bad hex");
        bytes += static_cast<char>(v);
      }
      p.data = image.storage->save(bytes);
    } else {
      return fail(ErrorCode::BadFormat, "property `" + llvm::Twine(*name) + "`: unknown type `" +
                                            llvm::Twine(type) + "`");
    }
    set.properties.push_back(p);
  }
  image.propertySets.push_back(std::move(set));
  return llvm::Error::success();
}

}  // namespace

llvm::Expected<DeviceImage> imageOfEntry(const bundle::Entry &entry, std::shared_ptr<Storage> storage) {
  auto recordedFormat = entry.get(kKeyFormat);
  if (!recordedFormat) {
    // Not devdl's: derive everything from the image, as for a loose file.
    ImageFormat format = formatOfKind(entry.imageKind, entry.image);
    if (format == ImageFormat::Unknown)
      return fail(ErrorCode::Unsupported, "image of unknown format (image kind " +
                                              llvm::Twine(static_cast<unsigned>(entry.imageKind)) + ")");
    auto image = readRawImage(entry.image, format, storage);
    if (!image) return image.takeError();
    if (auto triple = entry.get("triple"); triple && !triple->empty()) image->triple = *triple;
    if (auto arch = entry.get("arch"); arch && !arch->empty()) image->arch = *arch;
    return image;
  }
  DeviceImage image;
  auto format = formatFromName(*recordedFormat);
  if (!format || *format == ImageFormat::Unknown)
    return fail(ErrorCode::BadFormat, "unknown devdl.format `" + llvm::Twine(*recordedFormat) + "`");
  image.format = *format;
  image.bytes = entry.image;
  image.storage = std::move(storage);
  image.triple = entry.get("triple").value_or("");
  image.arch = entry.get("arch").value_or("");
  for (const auto &[key, kind, weak] : kSymbolKeys)
    for (std::string_view name : lines(entry.get(key).value_or(""))) image.symbols.push_back({name, kind, weak});
  if (auto statics = entry.get(kKeyStatics)) {
    image.statics = lines(*statics);
  } else if (listsStatics(image.format) && !image.bytes.empty()) {
    auto read = readRawImage(image.bytes, image.format, image.storage);
    if (!read) return read.takeError();
    image.statics = std::move(read->statics);
    image.checked = true;
  }
  for (const auto &[key, value] : entry.strings)
    if (key.starts_with(kPropertyPrefix))
      if (llvm::Error err = decodeProperties(key.substr(kPropertyPrefix.size()), value, image))
        return err;
  return image;
}

bundle::Entry entryOfImage(const DeviceImage &image, std::deque<std::string> &owned) {
  bundle::Entry entry;
  entry.imageKind = kindOfFormat(image.format);
  entry.image = image.bytes;
  auto add = [&](std::string_view key, std::string value) {
    entry.strings.emplace_back(key, owned.emplace_back(std::move(value)));
  };
  add(kKeyFormat, std::string(formatName(image.format)));
  if (!image.triple.empty()) add("triple", std::string(image.triple));
  if (!image.arch.empty()) add("arch", std::string(image.arch));
  for (const auto &[key, kind, weak] : kSymbolKeys) {
    std::string list;
    for (const Symbol &s : image.symbols)
      if (s.kind == kind && s.weak == weak) (list += s.name) += '\n';
    if (!list.empty()) {
      list.pop_back();
      add(key, std::move(list));
    }
  }
  if (listsStatics(image.format)) {
    std::string list;
    for (std::string_view name : image.statics) (list += name) += '\n';
    if (!list.empty()) list.pop_back();
    add(kKeyStatics, std::move(list));
  }
  for (const PropertySet &set : image.propertySets) {
    std::string_view key = owned.emplace_back(std::string(kPropertyPrefix) + std::string(set.name));
    add(key, encodeProperties(set));
  }
  return entry;
}

}  // namespace devdl
