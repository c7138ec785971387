// The packed format: round trips, determinism, alignment, interoperation with LLVM's own
// OffloadBinary, and hostile envelopes.
#include "bundle/offload_binary.h"
#include "image/bundle_entries.h"
#include "image/read_image.h"
#include "test_support.h"

#include <llvm/Object/OffloadBinary.h>
#include <llvm/Support/Endian.h>

namespace devdl::test {
namespace {

std::vector<DeviceImage> seedImages() {
  std::vector<DeviceImage> images;
  for (const char *name : {"lib.spv", "app.spv", "spec_constants.spv", "app.bc"}) {
    auto file = readImageFile(image(name));
    EXPECT_TRUE(!!file) << errorText(file);
    if (file) images.push_back(std::move(file->images[0]));
  }
  return images;
}

TEST(Bundle, RoundTripKeepsEverything) {
  std::vector<DeviceImage> images = seedImages();
  images[0].setProperty(kModuleSet, "id", PropertyType::String, "libseed\twith\\odd\nchars");
  images[0].setProperty(kDeviceRequirementsSet, "aspects", PropertyType::ByteArray,
                        std::string_view("\x06\0\0\0\x00\xff", 6));
  images[1].setProperty(kVirtualFunctionsSet, "dummy-image", 1);
  const std::string packed = packImages(images);

  auto file = readImageMemory(asBytes(packed), "seed.devdl", nullptr);
  ASSERT_TRUE(!!file) << errorText(file);
  ASSERT_EQ(file->images.size(), images.size());
  for (size_t i = 0; i < images.size(); ++i) {
    const DeviceImage &a = images[i], &b = file->images[i];
    EXPECT_EQ(a.format, b.format);
    EXPECT_EQ(a.triple, b.triple);
    EXPECT_EQ(a.arch, b.arch);
    EXPECT_EQ(asText(a.bytes), asText(b.bytes));
    EXPECT_EQ(symbolLines(a), symbolLines(b));
    ASSERT_EQ(a.propertySets.size(), b.propertySets.size()) << i;
    for (const PropertySet &set : a.propertySets) {
      const PropertySet *other = b.findSet(set.name);
      ASSERT_NE(other, nullptr) << set.name;
      ASSERT_EQ(set.properties.size(), other->properties.size());
      for (const Property &p : set.properties) {
        const Property *q = other->find(p.name);
        ASSERT_NE(q, nullptr) << p.name;
        EXPECT_EQ(p.type, q->type);
        EXPECT_EQ(p.u32, q->u32);
        EXPECT_EQ(p.data, q->data);
      }
    }
  }
  EXPECT_EQ(file->images[0].moduleId(), "libseed\twith\\odd\nchars");
}

// Statics are recorded (devdl.statics), empty or not; an envelope of a format that has them but
// without the key (an earlier devdl-pack's) has them read from its image.
TEST(Bundle, StaticsAreRecordedAndReadWhereAnEarlierPackDidNot) {
  auto lib = readImageFile(image("gstatic_lib.spv"));
  auto app = readImageFile(image("gstatic_read.spv"));
  ASSERT_TRUE(lib && app) << errorText(lib) << errorText(app);
  std::vector<DeviceImage> images{lib->images[0], app->images[0]};
  ASSERT_EQ(images[0].statics, (std::vector<std::string_view>{"Count"}));
  const std::string packed = packImages(images);
  auto file = readImageMemory(asBytes(packed), "gstatic.devdl", nullptr);
  ASSERT_TRUE(!!file) << errorText(file);
  EXPECT_EQ(file->images[0].statics, images[0].statics);
  EXPECT_TRUE(file->images[1].statics.empty());
  EXPECT_FALSE(file->images[0].checked) << "read from the keys alone";
  // The same envelopes without the key.
  std::deque<std::string> owned;
  std::vector<bundle::Entry> entries;
  for (const DeviceImage &image : images) {
    bundle::Entry &entry = entries.emplace_back(entryOfImage(image, owned));
    std::erase_if(entry.strings, [](const auto &string) { return string.first == "devdl.statics"; });
  }
  std::string earlier;
  bundle::writeBundle(entries, earlier);
  auto read = readImageMemory(asBytes(earlier), "earlier.devdl", nullptr);
  ASSERT_TRUE(!!read) << errorText(read);
  EXPECT_EQ(read->images[0].statics, images[0].statics);
  EXPECT_TRUE(read->images[0].checked) << "read from its image";
}

// An image of several that cannot be read (here a SPIR-V module of garbage, in an envelope of
// LLVM's, read from its bytes): the loader's read fails naming it; a listing keeps the reason in
// its place and reads the others on.
TEST(Bundle, AListingReadsPastAnImageItCannotRead) {
  const std::string bytes = bundleWithAnUnreadableImage(), app = readFile(image("app.spv"));
  const std::string strict = errorText(readImageMemory(asBytes(bytes), "three.devdl", nullptr));
  EXPECT_EQ(strict.rfind("three.devdl: image 1 (at offset ", 0), 0u) << strict;
  auto listed = readImageMemory(asBytes(bytes), "three.devdl", nullptr, /*listing=*/true);
  ASSERT_TRUE(!!listed) << errorText(listed);
  ASSERT_EQ(listed->images.size(), 3u);
  ASSERT_EQ(listed->unreadable.size(), 1u);
  EXPECT_EQ(listed->unreadable[0].first, 1u);
  EXPECT_EQ(listed->unreadable[0].second.rfind("image 1 (at offset ", 0), 0u) << listed->unreadable[0].second;
  EXPECT_EQ(listed->images[1].format, ImageFormat::Unknown);
  EXPECT_FALSE(symbolLines(listed->images[0]).empty());
  EXPECT_EQ(symbolLines(listed->images[2]), symbolLines(readImageMemory(asBytes(app), "app.spv", nullptr)->images[0]));
}

TEST(Bundle, OutputIsDeterministicAndAligned) {
  const std::string a = packImages(seedImages()), b = packImages(seedImages());
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size() % 8, 0u);
  auto entries = bundle::readBundle(asBytes(a));
  ASSERT_TRUE(!!entries) << errorText(entries);
  ASSERT_EQ(entries->size(), 4u);
  for (const auto &e : *entries) {
    EXPECT_EQ(e.offset % 8, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(e.image.data()) % 8,
              reinterpret_cast<uintptr_t>(a.data()) % 8);
    EXPECT_EQ(e.offloadKind, 0u);
  }
}

TEST(Bundle, ReadsWhatLlvmWrites) {
  const std::string spirv = readFile(image("lib.spv"));
  llvm::object::OffloadBinary::OffloadingImage in;
  in.TheImageKind = llvm::object::IMG_None;
  in.TheOffloadKind = llvm::object::OFK_OpenMP;
  in.Flags = 0;
  in.StringData["triple"] = "spir64-unknown-unknown";
  in.StringData["arch"] = "generic";
  in.Image = llvm::MemoryBuffer::getMemBuffer(spirv, "", false);
  std::string packed = llvm::object::OffloadBinary::write(in)->getBuffer().str();
  packed += packed;  // two envelopes back to back, as a linker concatenates them

  auto file = readImageMemory(asBytes(packed), "llvm.bin", nullptr);
  ASSERT_TRUE(!!file) << errorText(file);
  ASSERT_EQ(file->images.size(), 2u);
  for (const DeviceImage &img : file->images) {
    EXPECT_EQ(img.format, ImageFormat::SpirV);  // derived from the bytes: no devdl keys
    EXPECT_EQ(img.arch, "generic");
    EXPECT_EQ(symbolLines(img), (std::vector<std::string>{"D LibCounter", "T LibDeviceFunc", "T _Z8LibScalei"}));
  }
}

TEST(Bundle, LlvmReadsWhatDevdlWrites) {
  std::vector<DeviceImage> images = seedImages();
  const std::string packed = packImages(images);
  auto entries = bundle::readBundle(asBytes(packed));
  ASSERT_TRUE(!!entries) << errorText(entries);
  for (size_t i = 0; i < entries->size(); ++i) {
    const auto &e = (*entries)[i];
    const size_t size = llvm::support::endian::read64le(packed.data() + e.offset + 8);
    auto binary = llvm::object::OffloadBinary::create(
        llvm::MemoryBufferRef(llvm::StringRef(packed.data() + e.offset, size), ""));
    ASSERT_TRUE(!!binary) << llvm::toString(binary.takeError());
    EXPECT_EQ((*binary)->getImage().str(), asText(images[i].bytes));
    EXPECT_EQ((*binary)->getTriple().str(), images[i].triple);
    EXPECT_EQ((*binary)->getString("devdl.format").str(), formatName(images[i].format));
  }
}

// Fields of the first envelope, by offset: header then entry.
constexpr size_t kSizeField = 8, kEntryOffsetField = 16, kEntrySizeField = 24;
constexpr size_t kEntry = 32, kStringOffsetField = kEntry + 8, kStringCountField = kEntry + 16,
                 kImageOffsetField = kEntry + 24, kImageSizeField = kEntry + 32;

TEST(Bundle, HostileEnvelopesAreRefusedWithTheProblem) {
  const std::string good = packImages(seedImages());
  struct Case {
    const char *what;
    size_t field;
    uint64_t value;
    const char *message;
  } cases[] = {
      {"size too small", kSizeField, 8, "does not fit"},
      {"size past the end", kSizeField, good.size() + 8, "does not fit"},
      {"entry offset out of range", kEntryOffsetField, uint64_t(1) << 40, "entry out of range"},
      {"entry size too small", kEntrySizeField, 4, "entry out of range"},
      {"image offset out of range", kImageOffsetField, uint64_t(1) << 40, "out of range"},
      {"image size wraps", kImageSizeField, ~uint64_t(0), "out of range"},
      {"string count out of range", kStringCountField, uint64_t(1) << 60, "strings at"},
      {"string table out of range", kStringOffsetField, ~uint64_t(0) - 3, "out of range"},
  };
  for (const Case &c : cases) {
    std::string bad = good;
    llvm::support::endian::write64le(&bad[c.field], c.value);
    auto file = readImageMemory(asBytes(bad), "hostile.devdl", nullptr);
    ASSERT_FALSE(!!file) << c.what;
    const std::string message = errorText(file);
    EXPECT_NE(message.find("hostile.devdl: invalid bundle: envelope at offset 0: "), std::string::npos)
        << c.what << ": " << message;
    EXPECT_NE(message.find(c.message), std::string::npos) << c.what << ": " << message;
  }
}

TEST(Bundle, WrongVersionAndMagicAreRefused) {
  const std::string good = packImages(seedImages());
  std::string version = good;
  llvm::support::endian::write32le(&version[4], 2);
  auto file = readImageMemory(asBytes(version), "v2.devdl", nullptr);
  ASSERT_FALSE(!!file);
  EXPECT_NE(errorText(file).find("version 2 (only 1 is known)"), std::string::npos);

  // A second envelope with a broken magic: named by its offset.
  auto entries = bundle::readBundle(asBytes(good));
  ASSERT_TRUE(!!entries && entries->size() > 1);
  std::string magic = good;
  magic[(*entries)[1].offset] = 'X';
  file = readImageMemory(asBytes(magic), "magic.devdl", nullptr);
  ASSERT_FALSE(!!file);
  EXPECT_NE(errorText(file).find("envelope at offset " + std::to_string((*entries)[1].offset) + ": bad magic"),
            std::string::npos);
}

TEST(Bundle, StringOffsetsAreChecked) {
  const std::string good = packImages(seedImages());
  const uint64_t stringEntries = llvm::support::endian::read64le(good.data() + kStringOffsetField);
  std::string bad = good;
  llvm::support::endian::write64le(&bad[stringEntries], uint64_t(1) << 50);  // first key
  auto file = readImageMemory(asBytes(bad), "strings.devdl", nullptr);
  ASSERT_FALSE(!!file);
  EXPECT_NE(errorText(file).find("string offset 1125899906842624 out of range"), std::string::npos);

  // A string that runs to the end of the envelope without its NUL.
  const uint64_t size = llvm::support::endian::read64le(good.data() + kSizeField);
  bad = good;
  const uint64_t imageOffset = llvm::support::endian::read64le(good.data() + kImageOffsetField);
  llvm::support::endian::write64le(&bad[stringEntries + 8], imageOffset);
  std::fill(bad.begin() + imageOffset, bad.begin() + size, 'x');
  file = readImageMemory(asBytes(bad), "unterminated.devdl", nullptr);
  ASSERT_FALSE(!!file);
  EXPECT_NE(errorText(file).find("is not terminated"), std::string::npos);
}

// An envelope with no image whose `count` string entries, keys and values, all refer to one
// string of `length` bytes: 2 × count × length bytes referred to in count × 16 + length.
std::string envelopeOfOneString(uint64_t count, uint64_t length) {
  const uint64_t stringEntries = kEntry + bundle::kEntrySize, table = stringEntries + count * bundle::kStringEntrySize;
  const uint64_t size = llvm::alignTo(table + length + 1, bundle::kAlignment);
  std::string env(size, '\0');
  std::copy(std::begin(bundle::kMagic), std::end(bundle::kMagic), env.begin());
  auto put = [&](uint64_t at, uint64_t value) { llvm::support::endian::write64le(&env[at], value); };
  llvm::support::endian::write32le(&env[4], bundle::kVersion);
  put(kSizeField, size);
  put(kEntryOffsetField, kEntry);
  put(kEntrySizeField, bundle::kEntrySize);
  put(kStringOffsetField, stringEntries);
  put(kStringCountField, count);
  put(kImageOffsetField, size);
  for (uint64_t i = 0; i < count; ++i) {
    put(stringEntries + i * bundle::kStringEntrySize, table);
    put(stringEntries + i * bundle::kStringEntrySize + 8, table);
  }
  std::fill_n(env.begin() + table, length, 'a');
  return env;
}

// 16 MB of string entries all pointing into one 8 MB string refer to 8 TB: read, each entry's
// string was scanned to its end, and reading would take hours (the test's timeout is minutes).
// Strings may refer to 4 times the envelope's size in all: this is refused after 64 MB.
TEST(Bundle, StringsReferringToMoreThanTheEnvelopeHoldsAreRefused) {
  const std::string env = envelopeOfOneString(uint64_t(1) << 19, uint64_t(8) << 20);
  auto file = readImageMemory(asBytes(env), "strings.devdl", nullptr);
  ASSERT_FALSE(!!file);
  EXPECT_EQ(errorText(file), "strings.devdl: invalid bundle: envelope at offset 0: its string entries refer to more "
                             "than " + std::to_string(4 * env.size()) + " bytes of strings (4 times its size)");
  // Within the bound, the same shape reads.
  const std::string small = envelopeOfOneString(1, 1000);
  auto entries = bundle::readBundle(asBytes(small));
  ASSERT_TRUE(!!entries) << errorText(entries);
  EXPECT_EQ((*entries)[0].strings[0].second, std::string(1000, 'a'));
}

// LLVM's writer merges a string into the tail of a longer one: strings sharing bytes are read.
TEST(Bundle, StringsSharingBytesAreRead) {
  llvm::object::OffloadBinary::OffloadingImage in;
  in.TheImageKind = llvm::object::IMG_None;
  in.TheOffloadKind = llvm::object::OFK_OpenMP;
  in.Flags = 0;
  in.StringData["triple"] = "spir64-unknown-unknown";
  in.StringData["vendor"] = "unknown";
  in.Image = llvm::MemoryBuffer::getMemBuffer("", "", false);
  const std::string packed = llvm::object::OffloadBinary::write(in)->getBuffer().str();
  auto entries = bundle::readBundle(asBytes(packed));
  ASSERT_TRUE(!!entries) << errorText(entries);
  const std::string_view triple = *(*entries)[0].get("triple"), vendor = *(*entries)[0].get("vendor");
  EXPECT_EQ(vendor, "unknown");
  EXPECT_EQ(vendor.data(), triple.data() + triple.size() - vendor.size()) << "the writer no longer merges tails";
}

TEST(Bundle, EveryTruncationFailsCleanly) {
  std::vector<DeviceImage> images = seedImages();
  images.resize(2);
  const std::string good = packImages(images);
  for (size_t size = 1; size < good.size(); ++size) {
    auto entries = bundle::readBundle(asBytes(std::string_view(good).substr(0, size)));
    if (!entries) {
      llvm::consumeError(entries.takeError());
      continue;
    }
    // Only a cut exactly between the envelopes reads, as a shorter bundle.
    EXPECT_EQ(entries->size(), 1u) << size;
  }
}

TEST(Bundle, BadPropertyRecordsAreRefused) {
  std::vector<DeviceImage> images = seedImages();
  images.resize(1);
  images[0].setProperty(kModuleSet, "id", PropertyType::String, "m");
  std::string good = packImages(images);
  const size_t at = good.find("id\tstr\tm");
  ASSERT_NE(at, std::string::npos);
  for (auto [replacement, message] : {std::pair{"id\tu32\tm", "bad u32 value"},
                                      std::pair{"id\tzzz\tm", "unknown type `zzz`"},
                                      std::pair{"id\tstr\t\\", "ends inside an escape"},
                                      std::pair{"id str m", "line is not name, type, value"}}) {
    std::string bad = good;
    bad.replace(at, 8, replacement);
    auto file = readImageMemory(asBytes(bad), "props.devdl", nullptr);
    ASSERT_FALSE(!!file) << replacement;
    EXPECT_NE(errorText(file).find(message), std::string::npos) << replacement;
  }
}

}  // namespace
}  // namespace devdl::test
