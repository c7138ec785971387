// devdl-nm: lists what device images export and import, nm-style.
//
//   K kernel   T exported function   D exported variable   U import
//   d a variable the image keeps to itself (static), which has one instance as D's do
//
// Before an image's symbols, the files it needs and its run path, as readelf -d shows an ELF
// object's: `NEEDED libm.devdl`, `RUNPATH $ORIGIN/deps`.
//
// Exit status as nm's: 0 when every file was read, 1 when any could not be (each is reported,
// the others are still listed).
#include "backend/backend.h"
#include "backend/spirv/translation.h"
#include "image/aspects.h"
#include "image/registered_objects.h"
#include "image/read_image.h"
#include "support/demangle.h"
#include "support/error.h"
#include "support/printable.h"
#include "support/version.h"

#include <llvm/Support/CommandLine.h>
#include <llvm/Support/Endian.h>
#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace devdl;

namespace {

llvm::cl::OptionCategory category("devdl-nm options");
llvm::cl::list<std::string> inputs(llvm::cl::Positional, llvm::cl::desc("FILE..."), llvm::cl::OneOrMore,
                                   llvm::cl::cat(category));
llvm::cl::opt<bool> undefinedOnly("undefined-only", llvm::cl::desc("List imports only"),
                                  llvm::cl::cat(category));
llvm::cl::alias undefinedOnlyShort("u", llvm::cl::aliasopt(undefinedOnly), llvm::cl::desc("Alias for --undefined-only"));
llvm::cl::opt<bool> definedOnly("defined-only", llvm::cl::desc("List kernels and exports only"),
                                llvm::cl::cat(category));
llvm::cl::opt<bool> demangle("demangle", llvm::cl::desc("Demangle C++ names"), llvm::cl::cat(category));
llvm::cl::alias demangleShort("C", llvm::cl::aliasopt(demangle), llvm::cl::desc("Alias for --demangle"));
llvm::cl::opt<bool> json("json", llvm::cl::desc("Print JSON instead of nm lines"), llvm::cl::cat(category));
llvm::cl::opt<bool> properties("properties",
                               llvm::cl::desc("Also print every property set of every image"),
                               llvm::cl::cat(category));

bool selected(const Symbol &s) {
  if (undefinedOnly) return s.kind == SymbolKind::Import;
  if (definedOnly) return s.kind != SymbolKind::Import;
  return true;
}

std::string displayName(std::string_view name) {
  return demangle ? devdl::demangle(name) : std::string(name);
}

// A line of the listing: a symbol, or a static (`d`, as nm shows a local data symbol).
struct Listed {
  std::string_view name;
  char letter;
  std::string_view kind;
  bool weak = false;
};

// Symbols and statics as nm shows them: sorted by name, then by letter.
std::vector<Listed> listed(const DeviceImage &image) {
  std::vector<Listed> lines;
  for (const Symbol &s : image.symbols)
    if (selected(s)) lines.push_back({s.name, symbolLetter(s), symbolKindName(s.kind), s.weak});
  if (!undefinedOnly)
    for (std::string_view name : image.statics) lines.push_back({name, 'd', "static"});
  std::sort(lines.begin(), lines.end(), [](const Listed &a, const Listed &b) {
    return a.name != b.name ? a.name < b.name : a.letter < b.letter;
  });
  return lines;
}

// The recorded property sets and the seed's derived symbol sets, unless recorded already.
std::vector<PropertySet> allPropertySets(const DeviceImage &image) {
  std::vector<PropertySet> sets = image.propertySets;
  for (PropertySet &derived : symbolPropertySets(image))
    if (!image.findSet(derived.name) && !derived.properties.empty()) sets.push_back(std::move(derived));
  return sets;
}

llvm::StringRef ref(std::string_view s) { return {s.data(), s.size()}; }

std::string hex(std::string_view data) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : data) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

std::string target(const DeviceImage &image) {
  std::string t(image.triple);
  if (!image.arch.empty()) t += (t.empty() ? "" : " ") + std::string(image.arch);
  return t;
}

// What a byte array of the seed's property sets says, in words: " (fp64, gpu)" after the aspects
// an image requires, " (LibCounter, 4 bytes)" after a device global, " (SpecId 3 at 0, 4 bytes)"
// after a specialization constant's parts; "" for any other property.
std::string decoded(const DeviceImage &image, const PropertySet &set, const Property &p) {
  auto word = [&](size_t i) { return llvm::support::endian::read32le(p.data.data() + 4 * i); };
  std::string text;
  if (set.name == kDeviceRequirementsSet && p.name == "aspects" && p.data.size() % 4 == 0) {
    for (size_t i = 0; i < p.data.size() / 4; ++i) text += (text.empty() ? "" : ", ") + aspectText(word(i));
  } else if (set.name == kDeviceGlobalsSet) {
    if (auto global = deviceGlobalOf(image, p.name))
      text = std::string(global->variable) + ", " + std::to_string(global->size) + " bytes";
  } else if (set.name == kSpecConstantsSet && p.type == PropertyType::ByteArray) {
    for (const SpecConstantPart &part : specConstantPartsOf(image, p.name))
      text += (text.empty() ? "" : "; ") + ("SpecId " + std::to_string(part.specId) + " at " +
                                            std::to_string(part.offset) + ", " + std::to_string(part.size) + " bytes");
  }
  return text.empty() ? "" : " (" + text + ")";
}

void printText(const ImageFile &file, bool manyFiles, llvm::raw_ostream &os) {
  const bool manyImages = file.images.size() > 1;
  for (size_t i = 0; i < file.images.size(); ++i) {
    const DeviceImage &image = file.images[i];
    if (image.format == ImageFormat::Unknown) continue;  // unreadable: said on stderr
    // Headers as nm's for archive members: only where more than one thing is listed.
    if (manyImages || properties) {
      std::string what = std::string(ref(formatName(image.format)));
      if (std::string t = target(image); !t.empty()) what += ", " + t;
      os << "\n" << printable(file.name) << "(image " << i << ", " << printable(what) << "):\n";
    } else if (manyFiles) {
      os << "\n" << printable(file.name) << ":\n";
    }
    if (!undefinedOnly && !definedOnly) {
      for (std::string_view name : image.neededFiles()) os << "NEEDED " << printable(name) << '\n';
      if (!image.runPath().empty()) os << "RUNPATH " << printable(image.runPath()) << '\n';
    }
    for (const Listed &s : listed(image)) os << s.letter << ' ' << printable(displayName(s.name)) << '\n';
    if (!properties) continue;
    for (const PropertySet &set : allPropertySets(image)) {
      os << "[" << printable(set.name) << "]\n";
      for (const Property &p : set.properties) {
        os << "  " << printable(displayName(p.name)) << " = ";
        if (p.type == PropertyType::UInt32) os << p.u32 << '\n';
        else if (p.type == PropertyType::String) os << '"' << printable(p.data) << "\"\n";
        else os << "0x" << hex(p.data) << decoded(image, set, p) << '\n';
      }
    }
  }
}

void writeJson(llvm::json::OStream &j, const ImageFile &file) {
  j.attribute("file", file.name);
  j.attributeArray("images", [&] {
    for (size_t i = 0; i < file.images.size(); ++i) {
      const DeviceImage &image = file.images[i];
      if (image.format == ImageFormat::Unknown) continue;  // unreadable: said on stderr
      j.object([&] {
        j.attribute("index", static_cast<int64_t>(i));
        j.attribute("format", ref(formatName(image.format)));
        j.attribute("triple", ref(image.triple));
        j.attribute("arch", ref(image.arch));
        if (const auto needed = image.neededFiles(); !needed.empty())
          j.attributeArray("needed", [&] {
            for (std::string_view name : needed) j.value(ref(name));
          });
        if (!image.runPath().empty()) j.attribute("runpath", ref(image.runPath()));
        j.attributeArray("symbols", [&] {
          for (const Listed &s : listed(image))
            j.object([&] {
              j.attribute("name", displayName(s.name));
              j.attribute("kind", ref(s.kind));
              if (s.weak) j.attribute("weak", true);
            });
        });
        if (!properties) return;
        j.attributeObject("properties", [&] {
          for (const PropertySet &set : allPropertySets(image))
            j.attributeArray(ref(set.name), [&] {
              for (const Property &p : set.properties)
                j.object([&] {
                  j.attribute("name", ref(p.name));
                  j.attribute("type", ref(propertyTypeName(p.type)));
                  if (p.type == PropertyType::UInt32) j.attribute("value", static_cast<int64_t>(p.u32));
                  else if (p.type == PropertyType::String) j.attribute("value", ref(p.data));
                  else j.attribute("value", hex(p.data));
                });
            });
        });
      });
    }
  });
}

}  // namespace

int main(int argc, char **argv) {
  llvm::cl::HideUnrelatedOptions(category);
  llvm::cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "devdl-nm (" << devdl::devdlBuild() << ")\n" << devdl::backend::spirTranslationStatement() << "\n";
  });
  llvm::cl::ParseCommandLineOptions(argc, argv,
                                    "devdl-nm: list the kernels (K), exported functions (T) and "
                                    "variables (D) and imports (U) of device images, bundles and "
                                    "host ELF files that carry them\n");
  if (undefinedOnly && definedOnly) {
    llvm::errs() << "devdl-nm: --undefined-only and --defined-only exclude each other\n";
    return 1;
  }
  int status = 0;
  std::vector<ImageFile> files;
  for (const std::string &path : inputs) {
    auto file = readImageFile(path, /*listing=*/true);
    if (!file) {
      llvm::errs() << "devdl-nm: " << printable(llvm::toString(file.takeError())) << '\n';
      status = 1;
      continue;
    }
    // An image that could not be read is said, and the others listed, as nm goes on past a bad
    // archive member.
    for (const auto &unreadable : file->unreadable) {
      llvm::errs() << "devdl-nm: " << printable(file->name) << ": " << printable(unreadable.second) << '\n';
      status = 1;
    }
    // Listed all the same, as the loader reads them: said on the side.
    for (size_t i = 0; i < file->images.size(); ++i)
      if (!file->images[i].unvalidated.empty())
        llvm::errs() << "devdl-nm: " << printable(file->name) << ": " << printable(file->images[i].label(i))
                     << ": not validated (SPIRV-Tools could not vouch for it: " << printable(file->images[i].unvalidated)
                     << "); listed as read\n";
    if (!json) printText(*file, inputs.size() > 1, llvm::outs());
    else files.push_back(std::move(*file));
  }
  if (json) {
    llvm::json::OStream j(llvm::outs(), 2);
    j.array([&] {
      for (const ImageFile &file : files) j.object([&] { writeJson(j, file); });
    });
    llvm::outs() << '\n';
  }
  return status;
}
