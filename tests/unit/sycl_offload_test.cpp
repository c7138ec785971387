// DPC++'s offload tables in a host ELF file, read from a real library DPC++ built: oneMKL's data
// fitting (scripts/setup-debian.sh unpacks it beside Intel's OpenCL runtime), and broken copies.
#include "image/aspects.h"
#include "image/read_image.h"
#include "test_support.h"

#include <algorithm>
#include <filesystem>

namespace devdl::test {
namespace {

class SyclOffload : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(DEVDL_TEST_DPCPP_LIBRARY))
        << DEVDL_TEST_DPCPP_LIBRARY << " is missing: scripts/setup-debian.sh unpacks it";
    bytes_ = readFile(DEVDL_TEST_DPCPP_LIBRARY);
  }
  llvm::Expected<ImageFile> read(const std::string &bytes) { return readImageMemory(asBytes(bytes), "libdf.so", nullptr); }

  std::string bytes_;
};

TEST_F(SyclOffload, ReadsEveryImageOfALibraryDpcppBuilt) {
  auto file = read(bytes_);
  ASSERT_TRUE(!!file) << llvm::toString(file.takeError());
  ASSERT_EQ(file->images.size(), 528u) << "one descriptor of 528 device binaries";
  for (const DeviceImage &image : file->images) {
    EXPECT_EQ(image.format, ImageFormat::SpirV);
    EXPECT_EQ(std::count_if(image.symbols.begin(), image.symbols.end(),
                            [](const Symbol &s) { return s.kind == SymbolKind::Kernel; }),
              1)
        << "DPC++ puts one kernel in each";
  }
  // Their property sets: aspects without DPC++'s length in bits, numbers as numbers.
  const DeviceImage &last = file->images.back();
  auto aspects = requiredAspects(last);
  ASSERT_TRUE(!!aspects) << llvm::toString(aspects.takeError());
  EXPECT_EQ(*aspects, std::vector<uint32_t>{6}) << "fp64";
  const PropertySet *misc = last.findSet("SYCL/misc properties");
  ASSERT_NE(misc, nullptr);
  ASSERT_NE(misc->find("optLevel"), nullptr);
  EXPECT_EQ(misc->find("optLevel")->u32, 2u);
  EXPECT_NE(last.findSet("SYCL/kernel param opt"), nullptr);
  auto first = requiredAspects(file->images.front());
  ASSERT_TRUE(!!first);
  EXPECT_TRUE(first->empty());
}

TEST(SyclOffloadTables, ReadAsDpcppWritesThem) {
  // devdl_test_dpcpp: the tables written in C around the seed's SPIR-V, every pointer relocated.
  auto file = readImageFile(DEVDL_TEST_DPCPP_TABLES);
  ASSERT_TRUE(!!file) << llvm::toString(file.takeError());
  ASSERT_EQ(file->images.size(), 2u);
  EXPECT_EQ(asText(file->images[0].bytes), readFile(image("lib.spv")));
  EXPECT_EQ(asText(file->images[1].bytes), readFile(image("app.spv")));
  auto aspects = requiredAspects(file->images[1]);
  ASSERT_TRUE(!!aspects);
  EXPECT_EQ(*aspects, std::vector<uint32_t>{6});
  const PropertySet *misc = file->images[1].findSet("SYCL/misc properties");
  ASSERT_NE(misc, nullptr);
  ASSERT_TRUE(misc->find("optLevel") && misc->find("note"));
  EXPECT_EQ(misc->find("optLevel")->u32, 2u);
  EXPECT_EQ(misc->find("note")->data, "made by devdl's tests");
  EXPECT_EQ(file->images[0].findSet("SYCL/device requirements"), nullptr);
}

TEST_F(SyclOffload, ABrokenImageIsRefusedNamingIt) {
  // The first image's zstd frame, its magic gone.
  std::string broken = bytes_;
  const size_t frame = broken.find("\x28\xb5\x2f\xfd");
  ASSERT_NE(frame, std::string::npos);
  broken.replace(frame, 4, std::string(4, '\0'));
  auto file = read(broken);
  ASSERT_FALSE(!!file);
  EXPECT_EQ(llvm::toString(file.takeError()), "libdf.so: image 0 (DPC++): invalid zstd frame");
}

TEST_F(SyclOffload, ACutCopyIsRefusedNotRead) {
  for (size_t size : {bytes_.size() / 2, bytes_.size() * 9 / 10, bytes_.size() - 1}) {
    auto file = read(bytes_.substr(0, size));
    EXPECT_FALSE(!!file) << size;
    if (!file) {
      EXPECT_NE(llvm::toString(file.takeError()).find("libdf.so: "), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace devdl::test
