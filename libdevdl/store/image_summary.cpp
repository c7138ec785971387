#include "store/image_summary.h"

#include "backend/backend.h"
#include "store/disk_cache.h"
#include "support/debug.h"
#include "support/error.h"
#include "support/version.h"
#include "support/xxh3.h"

#include <llvm/ADT/Twine.h>

#include <algorithm>
#include <cstring>

namespace devdl::store {

namespace {

// A summary (host byte order, as the entry that holds it): this header, one Head for each image,
// then the images as devdl-pack bundles them (packImages), without their bytes.
constexpr char kMagic[8] = {'D', 'E', 'V', 'D', 'L', 'I', 'S', '\n'};
constexpr uint32_t kFormatVersion = 2;  // 2: statics

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t images;
};

struct Head {
  uint64_t hashLow, hashHigh;
  uint8_t bytes[8];
  uint8_t size;
  uint8_t unused[7];
};
static_assert(sizeof(Header) == 16 && sizeof(Head) == 32);

bool judgedByDriver(ImageFormat format) {
  return format == ImageFormat::OpenClBinary || format == ImageFormat::IntelNative;
}

}  // namespace

std::optional<Key> summaryKey(const struct stat &status, const struct timespec &now) {
  if (static_cast<uint64_t>(status.st_size) < kSummaryFrom) return std::nullopt;
  // The change time moves with every write (and with the modification time, when it is set).
  if (now.tv_sec - status.st_ctim.tv_sec < kSettledSeconds) return std::nullopt;
  // What the readers derive is this build's: another build may read the same file otherwise.
  static const std::string build = devdlBuild();
  return KeyBuilder()
      .add("devdl image summary")
      .add(kFormatVersion)
      .add(build)
      .add(static_cast<uint64_t>(status.st_dev))
      .add(static_cast<uint64_t>(status.st_ino))
      .add(static_cast<uint64_t>(status.st_size))
      .add(static_cast<uint64_t>(status.st_mtim.tv_sec))
      .add(static_cast<uint64_t>(status.st_mtim.tv_nsec))
      .add(static_cast<uint64_t>(status.st_ctim.tv_sec))
      .add(static_cast<uint64_t>(status.st_ctim.tv_nsec))
      .finish();
}

std::string summarize(const ImageFile &read) {
  Header header{};
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.version = kFormatVersion;
  header.images = static_cast<uint32_t>(read.images.size());
  std::string out(reinterpret_cast<const char *>(&header), sizeof header);
  std::vector<DeviceImage> described;
  described.reserve(read.images.size());
  for (const DeviceImage &image : read.images) {
    if (judgedByDriver(image.format) || image.unread) return "";
    const xxh3::Hash128 hash = xxh3::hash128(image.bytes.data(), image.bytes.size());
    Head head{hash.low, hash.high, {}, 0, {}};
    const Bytes first = image.head();
    std::memcpy(head.bytes, first.data(), first.size());
    head.size = static_cast<uint8_t>(first.size());
    out.append(reinterpret_cast<const char *>(&head), sizeof head);
    DeviceImage copy = image;
    copy.bytes = {};
    described.push_back(std::move(copy));
  }
  return out + packImages(described);
}

llvm::Expected<ImageFile> imagesOfSummary(Entry entry, std::shared_ptr<const RegularFile> file) {
  // The images' strings are views into the summary, and live as long as they do: a summary the
  // cache mapped (a large one) is copied, since a mapping would fault (SIGBUS) where the entry's
  // file were cut short meanwhile.
  std::string_view summary = entry.binary();
  std::unique_ptr<llvm::MemoryBuffer> buffer = std::move(entry.file);  // the same bytes: `summary` stays
  if (buffer->getBufferKind() == llvm::MemoryBuffer::MemoryBuffer_MMap) {
    buffer = llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(summary.data(), summary.size()));
    summary = std::string_view(buffer->getBufferStart(), buffer->getBufferSize());
  }
  auto bad = [&](const llvm::Twine &why) { return inFile(fail(ErrorCode::BadFormat, "image summary: " + why), file->path()); };
  Header header;
  if (summary.size() < sizeof header) return bad("truncated");
  std::memcpy(&header, summary.data(), sizeof header);
  if (std::memcmp(header.magic, kMagic, sizeof kMagic) != 0 || header.version != kFormatVersion)
    return bad("not a summary of this format");
  if (header.images == 0 || header.images > (summary.size() - sizeof header) / sizeof(Head))
    return bad(llvm::Twine(header.images) + " images in " + llvm::Twine(summary.size()) + " bytes");
  const size_t bundleAt = sizeof header + header.images * sizeof(Head);
  auto storage = std::make_shared<Storage>(std::move(buffer));  // what the images' strings are in
  auto images = readBundleImages(asBytes(summary.substr(bundleAt)), storage);
  if (!images) return inFile(images.takeError(), file->path());
  if (images->size() != header.images)
    return bad(llvm::Twine(images->size()) + " images where its header says " + llvm::Twine(header.images));
  ImageFile out{file->path(), std::move(*images), {}};
  for (uint32_t i = 0; i < header.images; ++i) {
    Head head;
    std::memcpy(&head, summary.data() + sizeof header + i * sizeof head, sizeof head);
    DeviceImage &image = out.images[i];
    if (judgedByDriver(image.format) || !image.bytes.empty() || head.size > sizeof head.bytes)
      return bad("image " + llvm::Twine(i) + " is not one a summary describes");
    image.unread = DeviceImage::Unread{file, i, head.hashLow, head.hashHigh, {}, head.size};
    std::copy_n(head.bytes, sizeof head.bytes, image.unread->head.begin());
  }
  return out;
}

llvm::Expected<ImageFile> readImageFileSummarized(const std::shared_ptr<const RegularFile> &file, DiskCache *cache) {
  if (!cache || !cache->enabled()) return readImageFile(*file);
  struct timespec now {};
  clock_gettime(CLOCK_REALTIME, &now);
  const std::optional<Key> key = summaryKey(file->status(), now);
  if (!key) return readImageFile(*file);
  if (std::optional<Entry> entry = cache->loadSummary(*key)) {
    auto images = imagesOfSummary(std::move(*entry), file);
    if (images) return images;
    // Its checksum held, so devdl wrote it: reported, and the file read as if it had none.
    if (Debug::get().on(Debug::Statistics)) Debug::get().print("cache: " + llvm::toString(images.takeError()));
    else llvm::consumeError(images.takeError());
  }
  auto read = readImageFile(*file);
  if (read)
    if (std::string summary = summarize(*read); !summary.empty())
      cache->storeSummary(*key, "image summary of " + file->path(), summary);
  return read;
}

}  // namespace devdl::store
