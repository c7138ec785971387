// Image files' summaries on their own: the key follows the file's status, a summary gives back
// what reading the file gives but its bytes, and reading those later finds them or says the file
// changed. Their use by the loader, with real programs, is in tests/e2e/disk_cache_test.cpp.
#include "store/disk_cache.h"
#include "store/image_summary.h"
#include "test_support.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <tuple>

namespace devdl::store {
namespace {

struct timespec at(time_t seconds) { return {seconds, 0}; }

struct stat large(time_t changed) {
  struct stat st {};
  st.st_dev = 8;
  st.st_ino = 1234;
  st.st_size = kSummaryFrom;
  st.st_mtim = {changed - 10, 5};
  st.st_ctim = {changed, 7};
  return st;
}

TEST(ImageSummary, TheKeyIsTheFilesStatusOnceItSettled) {
  const time_t changed = 1'700'000'000;
  const auto settled = at(changed + kSettledSeconds);
  ASSERT_TRUE(summaryKey(large(changed), settled));
  EXPECT_FALSE(summaryKey(large(changed), at(changed + kSettledSeconds - 1))) << "changed too recently";
  struct stat small = large(changed);
  small.st_size = kSummaryFrom - 1;
  EXPECT_FALSE(summaryKey(small, settled)) << "cheaper to read than a summary";
  const Key key = *summaryKey(large(changed), settled);
  EXPECT_EQ(*summaryKey(large(changed), at(changed + 3600)), key) << "the same file, later";
  // Any field of the status moved is another file, or the same one written since.
  for (auto move : std::initializer_list<void (*)(struct stat &)>{
           [](struct stat &st) { ++st.st_dev; }, [](struct stat &st) { ++st.st_ino; },
           [](struct stat &st) { ++st.st_size; }, [](struct stat &st) { ++st.st_mtim.tv_nsec; },
           [](struct stat &st) { ++st.st_mtim.tv_sec; }, [](struct stat &st) { ++st.st_ctim.tv_nsec; }}) {
    struct stat other = large(changed);
    move(other);
    ASSERT_TRUE(summaryKey(other, settled));
    EXPECT_NE(*summaryKey(other, settled), key);
  }
}

// The entry a disk cache would give back for `summary`.
Entry entryOf(const std::string &summary) {
  const Key key = KeyBuilder().add("summary").finish();
  const std::string bytes = entryHeader(key, "image summary", summary, 0) + summary + "image summary";
  Entry entry;
  EXPECT_EQ(verifyEntry(llvm::MemoryBuffer::getMemBufferCopy(bytes), key, entry), "");
  return entry;
}

std::shared_ptr<const RegularFile> opened(const std::string &path) {
  auto file = RegularFile::open(path);
  if (!file) ADD_FAILURE() << llvm::toString(file.takeError());
  return file ? std::make_shared<const RegularFile>(std::move(*file)) : nullptr;
}

std::set<std::pair<std::string, SymbolKind>> symbolsOf(const DeviceImage &image) {
  std::set<std::pair<std::string, SymbolKind>> out;
  for (const Symbol &s : image.symbols) out.emplace(s.name, s.kind);
  return out;
}

TEST(ImageSummary, GivesWhatReadingGivesButTheBytes) {
  // A raw image, a bundle of two (the seed's SPIR-V), and one with properties devdl-pack recorded.
  for (const char *name : {"lib_large.spv", "seed-spirv.devdl", "spec-object.spv.devdl"}) {
    SCOPED_TRACE(name);
    const auto file = opened(test::image(name));
    ASSERT_TRUE(file);
    auto read = readImageFile(*file);
    ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
    const std::string summary = summarize(*read);
    ASSERT_FALSE(summary.empty());
    auto known = imagesOfSummary(entryOf(summary), file);
    ASSERT_TRUE(bool(known)) << llvm::toString(known.takeError());
    EXPECT_EQ(known->name, file->path());
    ASSERT_EQ(known->images.size(), read->images.size());
    for (size_t i = 0; i < read->images.size(); ++i) {
      const DeviceImage &was = read->images[i], &is = known->images[i];
      EXPECT_EQ(is.format, was.format);
      EXPECT_EQ(is.triple, was.triple);
      EXPECT_EQ(is.arch, was.arch);
      EXPECT_EQ(symbolsOf(is), symbolsOf(was));
      EXPECT_EQ(symbolPropertySets(is).size(), symbolPropertySets(was).size());
      ASSERT_EQ(is.propertySets.size(), was.propertySets.size());
      for (const PropertySet &set : was.propertySets) {
        const PropertySet *same = is.findSet(set.name);
        ASSERT_NE(same, nullptr) << set.name;
        ASSERT_EQ(same->properties.size(), set.properties.size()) << set.name;
        for (const Property &p : set.properties) {
          const Property *q = same->find(p.name);
          ASSERT_NE(q, nullptr) << p.name;
          EXPECT_EQ(std::tie(q->type, q->u32, q->data), std::tie(p.type, p.u32, p.data)) << p.name;
        }
      }
      EXPECT_TRUE(is.bytes.empty());
      ASSERT_TRUE(is.unread);
      EXPECT_EQ(is.unread->index, i);
      const Bytes head = is.head(), wasHead = was.head();
      EXPECT_TRUE(std::equal(head.begin(), head.end(), wasHead.begin(), wasHead.end()));
      // Read when linked: the bytes the file has at that index.
      auto linked = readUnread(is);
      ASSERT_TRUE(bool(linked)) << llvm::toString(linked.takeError());
      EXPECT_TRUE(std::equal(linked->bytes.begin(), linked->bytes.end(), was.bytes.begin(), was.bytes.end()));
      EXPECT_FALSE(linked->unread);
    }
  }
}

TEST(ImageSummary, TheImagesOfOneLinkReadTheirFileOnce) {
  const auto file = opened(test::image("seed-spirv.devdl"));  // two images
  ASSERT_TRUE(file);
  auto read = readImageFile(*file);
  ASSERT_TRUE(bool(read));
  auto known = imagesOfSummary(entryOf(summarize(*read)), file);
  ASSERT_TRUE(bool(known));
  ASSERT_EQ(known->images.size(), 2u);
  UnreadFiles files;
  auto first = readUnread(known->images[0], files), second = readUnread(known->images[1], files);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(files.size(), 1u);
  EXPECT_EQ(first->storage, second->storage) << "one read of the file";
  for (size_t i = 0; i < 2; ++i) {
    const Bytes bytes = (i ? second : first)->bytes, was = read->images[i].bytes;
    EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), was.begin(), was.end())) << "image " << i;
  }
}

TEST(ImageSummary, ReadingTheBytesOfAChangedFileFailsSayingSo) {
  const std::string path = test::scratchDir() + "/lib_large.spv";
  test::writeFile(path, test::readFile(test::image("lib_large.spv")));
  const auto file = opened(path);
  ASSERT_TRUE(file);
  auto read = readImageFile(*file);
  ASSERT_TRUE(bool(read));
  auto known = imagesOfSummary(entryOf(summarize(*read)), file);
  ASSERT_TRUE(bool(known));
  for (const char *change : {"a byte of a function's name", "cut short"}) {
    SCOPED_TRACE(change);
    std::string bytes = test::readFile(test::image("lib_large.spv"));
    if (change[0] == 'a') {
      const size_t name = bytes.find("LibLarge0123");
      ASSERT_NE(name, std::string::npos);
      bytes[name + 8] = '9';  // still valid SPIR-V, other bytes
    } else {
      bytes.resize(bytes.size() / 2);
    }
    test::writeFile(path, bytes);  // in place: the file opened
    auto linked = readUnread(known->images[0]);
    ASSERT_FALSE(bool(linked));
    EXPECT_EQ(test::errorCode(linked.takeError()), ErrorCode::Io);
    auto again = readUnread(known->images[0]);
    EXPECT_NE(test::errorText(again).find("the file changed since it was opened"), std::string::npos);
  }
}

TEST(ImageSummary, ALargeSummaryOutlivesItsEntrysFile) {
  // A summary over 16 KB, which the disk cache maps: the images keep a copy of their strings.
  const std::string dir = test::scratchDir();
  ImageFile many{"many.spv", {}, {}};
  DeviceImage image;
  image.format = ImageFormat::SpirV;
  const std::string bytes = test::readFile(test::image("lib.spv"));
  image.bytes = asBytes(bytes);
  image.storage = std::make_shared<Storage>();
  for (int i = 0; i < 2000; ++i)
    image.symbols.push_back({image.storage->save("AFunctionOfALargeLibrary" + std::to_string(i)), SymbolKind::Function});
  many.images.push_back(image);
  const std::string summary = summarize(many);
  ASSERT_GT(summary.size(), 32u * 1024);
  DiskCache cache(dir + "/cache", uint64_t(1) << 30);
  const Key key = KeyBuilder().add("many").finish();
  cache.storeSummary(key, "image summary of many.spv", summary);
  auto entry = cache.loadSummary(key);
  ASSERT_TRUE(entry);
  const auto file = opened(test::image("lib.spv"));
  auto known = imagesOfSummary(std::move(*entry), file);
  ASSERT_TRUE(bool(known)) << llvm::toString(known.takeError());
  // The entry's file cut short, as another process could: what was read stays.
  const auto entries = llvm::cantFail(cache.list());
  ASSERT_EQ(entries.size(), 1u);
  ASSERT_EQ(truncate(entries[0].path.c_str(), 0), 0);
  ASSERT_EQ(known->images.size(), 1u);
  EXPECT_EQ(symbolsOf(known->images[0]), symbolsOf(image));
}

TEST(ImageSummary, NativeBinariesAreNotSummarized) {
  ImageFile file{"native.bin", {}, {}};
  DeviceImage native;
  native.format = ImageFormat::OpenClBinary;
  const uint8_t bytes[] = {1, 2, 3, 4};
  native.bytes = bytes;
  file.images.push_back(native);
  EXPECT_EQ(summarize(file), "") << "only its driver judges it, from its bytes";
}

TEST(ImageSummary, WhatIsNotASummaryIsRefused) {
  const auto file = opened(test::image("seed-spirv.devdl"));
  ASSERT_TRUE(file);
  auto read = readImageFile(*file);
  ASSERT_TRUE(bool(read));
  const std::string good = summarize(*read);
  ASSERT_TRUE(bool(imagesOfSummary(entryOf(good), file)));
  auto withCount = [&](uint32_t count) {
    std::string s = good;
    std::memcpy(s.data() + 12, &count, sizeof count);
    return s;
  };
  const std::string cases[] = {
      "",                                   // nothing
      good.substr(0, 15),                   // shorter than its header
      "DEVDLXX\n" + good.substr(8),         // another magic
      withCount(0),                         // no images
      withCount(1000),                      // more images than bytes for them
      withCount(1),                         // fewer than the bundle holds
      good.substr(0, good.size() - 10),     // the bundle cut short
  };
  for (const std::string &bad : cases) {
    auto images = imagesOfSummary(entryOf(bad), file);
    ASSERT_FALSE(bool(images)) << "a summary of " << bad.size() << " bytes";
    EXPECT_EQ(test::errorCode(images.takeError()), ErrorCode::BadFormat);
  }
}

}  // namespace
}  // namespace devdl::store
