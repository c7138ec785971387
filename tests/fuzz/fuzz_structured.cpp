// A structure-aware generator beside fuzz_parser.cpp's byte mutators: the input is a list of
// choices (FuzzedDataProvider) that build a bundle (docs/bundle-format.md: LLVM OffloadBinary
// envelopes back to back) or a CUDA fat binary (layout at the top of image/fatbin_reader.cpp), maybe
// carried by a host ELF object. Every size, offset, count and string offset is right unless the
// input says otherwise: then off by a little, or anything. Fat binary members may be compressed
// with zstd for real, with recorded sizes that lie, or inflate to far more than they hold. What was
// built is read as a file, each image is checked as before a link, and each fat binary's readable
// members are inflated one at a time as a backend does: every input is read or refused, with no
// crash, sanitizer report or huge allocation (run with -rss_limit_mb and -malloc_limit_mb).
#include "bundle/host_elf.h"
#include "bundle/offload_binary.h"
#include "image/read_image.h"
#include "image/readers.h"

#include <fuzzer/FuzzedDataProvider.h>
#include <llvm/Support/Endian.h>
#include <llvm/Support/MathExtras.h>

#include <zstd.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace devdl;

template <typename T>
void put(std::string &out, T value) {
  char bytes[sizeof(T)];
  llvm::support::endian::write<T, llvm::support::little, 1>(bytes, value);
  out.append(bytes, sizeof(T));
}

void padTo8(std::string &out) { out.resize(llvm::alignTo(out.size(), 8), '\0'); }

class Generator {
 public:
  Generator(const uint8_t *data, size_t size) : in_(data, size) {}

  /// A bundle, a fat binary or a host object carrying a bundle, with a few bytes changed.
  std::string file() {
    std::string bytes;
    switch (in_.ConsumeIntegralInRange(0, 3)) {
      case 0: bytes = offloadBundle(0); break;
      case 1: bytes = fatBinary(0); break;
      case 2: bytes = hostObject(offloadBundle(0)); break;
      case 3:  // a bundle added to an object that carries one already (devdl-pack --add-to)
        if (auto added = bundle::addBundleToElf(asBytes(hostObject(offloadBundle(0))), asBytes(offloadBundle(0))))
          bytes = std::move(*added);
        else
          llvm::consumeError(added.takeError());
        break;
    }
    for (int changes = in_.ConsumeIntegralInRange(0, 2); changes > 0 && !bytes.empty(); --changes)
      bytes[in_.ConsumeIntegralInRange<size_t>(0, bytes.size() - 1)] = in_.ConsumeIntegral<char>();
    return bytes;
  }

 private:
  // The true value of a size, offset or count, unless the input says: off by a little, or anything.
  uint64_t field(uint64_t truth) {
    switch (in_.ConsumeIntegralInRange(0, 15)) {
      case 13: return truth + in_.ConsumeIntegralInRange<int64_t>(-9, 9);
      case 14: return in_.ConsumeIntegral<uint32_t>();
      case 15: return in_.ConsumeIntegral<uint64_t>();
      default: return truth;
    }
  }

  std::string text() { return in_.ConsumeRandomLengthString(64); }

  // Something an envelope or a fat binary member may hold.
  std::string image(int depth) {
    switch (in_.ConsumeIntegralInRange(0, depth < 2 ? 5 : 3)) {
      case 0:
        return ".version 8.0\n.target sm_" + std::to_string(in_.ConsumeIntegralInRange(50, 100)) +
               "\n.address_size 64\n.extern .func " + text() + " ();\n.visible .entry " + text() +
               " () { ret; }\n" + text();
      case 1: {  // a SPIR-V header and whatever follows
        std::string spirv;
        for (uint32_t word : {0x07230203u, 0x00010000u, 0u, in_.ConsumeIntegral<uint32_t>(), 0u}) put(spirv, word);
        return spirv + in_.ConsumeRandomLengthString(256);
      }
      case 2: return in_.ConsumeRandomLengthString(256);
      case 3: return std::string(in_.ConsumeIntegralInRange<size_t>(0, 4096), '\0');
      case 4: return fatBinary(depth + 1);
      default: return offloadBundle(depth + 1);
    }
  }

  std::string fatBinary(int depth) {
    std::string body;
    for (int members = in_.ConsumeIntegralInRange(0, 4); members > 0; --members) {
      const uint16_t kind = static_cast<uint16_t>(field(in_.ConsumeBool() ? 1 : 2));  // PTX, ELF
      std::string content = image(depth), stored = content;
      uint64_t flags = 0;
      switch (in_.ConsumeIntegralInRange(0, 2)) {
        case 1: {  // zstd, maybe of far more than the fat binary holds
          flags = 0x8000;
          content.resize(content.size() + (in_.ConsumeBool() ? in_.ConsumeIntegralInRange<size_t>(0, 1 << 22) : 0));
          stored.resize(ZSTD_compressBound(content.size()));
          const size_t size = ZSTD_compress(stored.data(), stored.size(), content.data(), content.size(), 1);
          if (ZSTD_isError(size)) std::abort();
          stored.resize(size);
          break;
        }
        case 2: flags = 0x2000; break;  // NVIDIA's own compression
      }
      std::string entry;
      put<uint16_t>(entry, kind);
      put<uint16_t>(entry, 0);
      put<uint32_t>(entry, static_cast<uint32_t>(field(64)));
      put<uint64_t>(entry, field(llvm::alignTo(stored.size(), 8)));
      put<uint32_t>(entry, static_cast<uint32_t>(field(stored.size())));
      put<uint32_t>(entry, 0);
      put<uint32_t>(entry, 0);  // minor, major
      put<uint32_t>(entry, in_.ConsumeBool() ? in_.ConsumeIntegral<uint32_t>() : in_.PickValueInArray({52, 80, 90}));
      put<uint32_t>(entry, 0);
      put<uint32_t>(entry, 0);  // name offset, size
      put<uint64_t>(entry, field(flags));
      put<uint64_t>(entry, 0);
      put<uint64_t>(entry, field(flags & 0x8000 ? content.size() : 0));
      body += entry + stored;
      padTo8(body);
    }
    std::string header;
    put<uint32_t>(header, 0xBA55ED50);
    put<uint16_t>(header, 1);
    put<uint16_t>(header, static_cast<uint16_t>(field(16)));
    put<uint64_t>(header, field(body.size()));
    return header + body;
  }

  // A key devdl or LLVM writes, and a value of the kind it takes.
  std::pair<std::string, std::string> keyAndValue() {
    switch (in_.ConsumeIntegralInRange(0, 5)) {
      case 0:
        return {"devdl.format", in_.PickValueInArray({"spirv", "spir-bc", "cubin", "ptx", "fatbin", "elf",
                                                      "opencl-binary", "unknown"})};
      case 1: return {in_.PickValueInArray({"triple", "arch"}), text()};
      case 2:
        return {in_.PickValueInArray({"devdl.kernels", "devdl.functions", "devdl.variables", "devdl.imports"}),
                text() + "\n" + text()};
      case 3:
        return {"devdl.property." + text(),
                text() + "\t" + in_.PickValueInArray({"u32", "str", "bytes"}) + "\t" + text() + "\n" + text()};
      default: return {text(), text()};
    }
  }

  // One envelope, laid out as LLVM writes it: header, entry, string entries, string table, image.
  std::string envelope(int depth) {
    std::vector<std::pair<std::string, std::string>> strings;
    for (int n = in_.ConsumeIntegralInRange(0, 6); n > 0; --n) strings.push_back(keyAndValue());
    const std::string payload = image(depth);
    const uint64_t stringEntries = bundle::kHeaderSize + bundle::kEntrySize;
    const uint64_t tableStart = stringEntries + strings.size() * bundle::kStringEntrySize;
    std::string table(1, '\0'), entries;
    // A string already in the table (a tail of a longer one, as LLVM merges them) may be shared.
    auto place = [&](const std::string &s) {
      const size_t found = table.find(s + '\0');
      if (found != std::string::npos && in_.ConsumeBool()) return field(tableStart + found);
      const uint64_t at = tableStart + table.size();
      table += s + '\0';
      return field(at);
    };
    for (const auto &[key, value] : strings) {
      put<uint64_t>(entries, place(key));
      put<uint64_t>(entries, place(value));
    }
    const uint64_t imageOffset = llvm::alignTo(tableStart + table.size(), 8);
    const uint64_t size = llvm::alignTo(imageOffset + payload.size(), 8);
    std::string out(reinterpret_cast<const char *>(bundle::kMagic), sizeof(bundle::kMagic));
    put<uint32_t>(out, static_cast<uint32_t>(field(bundle::kVersion)));
    put<uint64_t>(out, field(size));
    put<uint64_t>(out, field(bundle::kHeaderSize));
    put<uint64_t>(out, field(bundle::kEntrySize));
    put<uint16_t>(out, static_cast<uint16_t>(field(in_.ConsumeIntegralInRange(0, 5))));  // image kind
    put<uint16_t>(out, 0);
    put<uint32_t>(out, 0);
    put<uint64_t>(out, field(stringEntries));
    put<uint64_t>(out, field(strings.size()));
    put<uint64_t>(out, field(imageOffset));
    put<uint64_t>(out, field(payload.size()));
    out += entries + table;
    padTo8(out);
    out += payload;
    padTo8(out);
    return out;
  }

  std::string offloadBundle(int depth) {
    std::string out;
    for (int n = in_.ConsumeIntegralInRange(1, 3); n > 0; --n) {
      out += envelope(depth);
      if (in_.ConsumeBool()) out += std::string(8, '\0');  // linkers pad between objects' bundles
    }
    return out;
  }

  std::string hostObject(const std::string &carried) {
    auto object = bundle::makeHostObject(asBytes(carried), "", "fuzz_bundle");
    if (!object) std::abort();  // the host's own target: always there
    return std::move(*object);
  }

  FuzzedDataProvider in_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string bytes = Generator(data, size).file();
  auto file = readImageMemory(asBytes(bytes), "fuzz", nullptr);
  if (!file) {
    llvm::consumeError(file.takeError());
    return 0;
  }
  for (const DeviceImage &image : file->images) {
    llvm::consumeError(checkImage(image).takeError());
    if (image.format != ImageFormat::Fatbin) continue;
    Storage listing;
    auto members = readers::listFatbinMembers(image.bytes, listing);
    if (!members) {
      llvm::consumeError(members.takeError());
      continue;
    }
    for (const readers::FatbinMember &member : *members) {
      Storage scratch;  // one member inflated at a time, as for a link
      if (member.readable()) llvm::consumeError(readers::fatbinMemberImage(member, scratch).takeError());
    }
  }
  return 0;
}
