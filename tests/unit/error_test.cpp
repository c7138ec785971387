// Files that are not there or hold nothing devdl can read: clear errors naming file and problem.
#include "backend/spirv/link.h"
#include "backend/spirv/translation.h"
#include "bundle/host_elf.h"
#include "image/read_image.h"
#include "test_support.h"

#include <sys/stat.h>

#include <filesystem>

namespace devdl::test {
namespace {

TEST(ReadErrors, MissingFile) {
  auto file = readImageFile("/nonexistent/lib.spv");
  ASSERT_FALSE(!!file);
  EXPECT_EQ(errorCode(file.takeError()), ErrorCode::NotFound);
  file = readImageFile("/nonexistent/lib.spv");
  EXPECT_EQ(errorText(file), "/nonexistent/lib.spv: No such file or directory");
}

TEST(ReadErrors, EmptyFileDirectoryAndUnknownFormat) {
  const std::string dir = scratchDir();
  writeFile(dir + "/empty.spv", "");
  writeFile(dir + "/text.spv", "hello, world\n");
  auto empty = readImageFile(dir + "/empty.spv");
  EXPECT_EQ(errorText(empty), dir + "/empty.spv: empty file");
  auto text = readImageFile(dir + "/text.spv");
  EXPECT_EQ(errorText(text), dir + "/text.spv: not a device image, bundle or ELF file (unknown format)");
  auto directory = readImageFile(dir);
  ASSERT_FALSE(!!directory);
  EXPECT_NE(errorText(directory).find(dir + ": "), std::string::npos);
}

TEST(ReadErrors, UnreadableFile) {
  if (geteuid() == 0) GTEST_SKIP() << "running as root: file permissions do not stop reads";
  const std::string dir = scratchDir();
  writeFile(dir + "/secret.spv", readFile(image("lib.spv")));
  ASSERT_EQ(chmod((dir + "/secret.spv").c_str(), 0), 0);
  auto file = readImageFile(dir + "/secret.spv");
  EXPECT_EQ(errorText(file), dir + "/secret.spv: Permission denied");
}

TEST(ReadErrors, NonDeviceElfIsRefused) {
  auto file = readImageFile("/proc/self/exe");
  ASSERT_FALSE(!!file);
  EXPECT_EQ(errorText(file), "/proc/self/exe: host ELF file carries no device images (no .llvm.offloading, .nv_fatbin or __nv_relfatbin section, nor DPC++'s offload descriptor)");
}

// Every reader, given a few bytes of nothing, refuses them (the fuzzers call readers directly
// too, past the format sniffing that would stop such input earlier).
TEST(ReadErrors, EveryReaderRefusesTinyInput) {
  for (ImageFormat format : {ImageFormat::SpirV, ImageFormat::SpirBitcode, ImageFormat::Cubin,
                             ImageFormat::Ptx, ImageFormat::Fatbin}) {
    for (char fill : {'\0', '\xff'}) {
      for (size_t size = 1; size < 32; ++size) {
        const std::string bytes(size, fill);
        auto image = readRawImage(asBytes(bytes), format, std::make_shared<Storage>());
        EXPECT_FALSE(!!image) << formatName(format) << " " << size;
        llvm::consumeError(image.takeError());
      }
    }
  }
}

// Inputs that once made a parser read out of bounds, crash or leak (found by the fuzzers; the ASan
// build catches a relapse): each is read or refused naming the file.
TEST(ReadErrors, FuzzRegressions) {
  const std::filesystem::path dir = std::filesystem::path(DEVDL_TEST_DATA) / "fuzz-regressions";
  size_t count = 0;
  for (const auto &entry : std::filesystem::directory_iterator(dir)) {
    auto file = readImageFile(entry.path());
    if (!file) {
      EXPECT_EQ(errorText(file).rfind(entry.path().string() + ": ", 0), 0u);
    }
    ++count;
  }
  EXPECT_GT(count, 0u);
}

// devdl-pack --cuda-register reads objects and static libraries' members as ELF alone: an
// OffloadBinary header whose entry lies a terabyte away (LLVM 15's generic reader follows it;
// the fuzzer found that) is refused as a file and skipped as a member.
TEST(ReadErrors, CudaModuleIdsReadElfObjectsAlone) {
  std::string offload("\x10\xff\x10\xad", 4);
  auto put64 = [&](uint64_t value) { offload.append(reinterpret_cast<const char *>(&value), 8); };
  offload.append("\x01\0\0\0", 4);  // version
  put64(128);                          // size
  put64(uint64_t(1) << 40);            // entry offset
  put64(64);                           // entry size
  offload.resize(128, '\0');
  auto ids = bundle::cudaModuleIds(asBytes(offload));
  EXPECT_EQ(errorText(ids), "neither an ELF object nor a static library");

  std::string header = "m.o/";
  header.resize(48, ' ');
  header += std::to_string(offload.size());
  header.resize(58, ' ');
  header += "`\n";
  const std::string archive = "!<arch>\n" + header + offload;
  auto fromArchive = bundle::cudaModuleIds(asBytes(archive));
  ASSERT_TRUE(!!fromArchive) << errorText(fromArchive);
  EXPECT_TRUE(fromArchive->empty());
}

// The same inputs' SPIR-V images, linked, through the optimization across images as a device
// that takes IL gets it (the SPIR path, PoCL's, runs them in HostileInput's tests): each is
// optimized or refused; none ends the process (the translator's writer asserted on one).
TEST(ReadErrors, FuzzRegressionsOptimizedForIl) {
  const std::filesystem::path dir = std::filesystem::path(DEVDL_TEST_DATA) / "fuzz-regressions";
  size_t linked = 0;
  for (const auto &entry : std::filesystem::directory_iterator(dir)) {
    auto file = readImageFile(entry.path());
    if (!file) {
      llvm::consumeError(file.takeError());
      continue;
    }
    std::vector<const DeviceImage *> images;
    std::vector<std::string> labels;
    for (const DeviceImage &image : file->images)
      if (image.format == ImageFormat::SpirV) {
        images.push_back(&image);
        labels.push_back(entry.path().filename().string());
      }
    auto words = images.empty() ? llvm::Expected<std::vector<uint32_t>>(std::vector<uint32_t>())
                                : backend::linkSpirv(images, labels);
    if (!words || words->empty()) {
      llvm::consumeError(words.takeError());
      continue;
    }
    llvm::consumeError(backend::optimizeSpirv(*words).takeError());
    ++linked;
  }
  EXPECT_GT(linked, 0u);
}

// What the program cache asks of a backend's refusal (ErrorCode::Busy: keep the entry): a code
// among joined errors, which stay as they were.
TEST(Errors, HasCodeFindsACodeAmongJoinedErrorsAndKeepsThem) {
  llvm::Error one = fail(ErrorCode::Busy, "taken");
  EXPECT_TRUE(hasCode(one, ErrorCode::Busy));
  EXPECT_FALSE(hasCode(one, ErrorCode::BadFormat));
  EXPECT_EQ(llvm::toString(std::move(one)), "taken");
  llvm::Error joined =
      llvm::joinErrors(fail(ErrorCode::BadFormat, "bad"), inImage(fail(ErrorCode::Busy, "taken"), "image 0 (spirv)"));
  EXPECT_TRUE(hasCode(joined, ErrorCode::Busy));
  EXPECT_TRUE(hasCode(joined, ErrorCode::BadFormat));
  EXPECT_EQ(llvm::toString(std::move(joined)), "bad\nimage 0 (spirv): taken");
  llvm::Error other = llvm::createStringError(std::errc::invalid_argument, "not devdl's");
  EXPECT_FALSE(hasCode(other, ErrorCode::Busy));
  EXPECT_EQ(llvm::toString(std::move(other)), "not devdl's");
  llvm::Error none = llvm::Error::success();
  EXPECT_FALSE(hasCode(none, ErrorCode::Busy));
  EXPECT_FALSE(!!none);
}

}  // namespace
}  // namespace devdl::test
