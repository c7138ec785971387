// NVIDIA formats: cubin and PTX from nvcc -rdc (skipped without a CUDA toolkit), hand-written
// PTX, and fat binaries including hostile ones built here.
#include "image/read_image.h"
#include "image/readers.h"
#include "test_support.h"

#include <llvm/Support/Endian.h>

namespace devdl::test {
namespace {

TEST(CubinReader, LibraryAndAppSymbolsAndArch) {
  DEVDL_REQUIRE_CUDA_IMAGES();
  auto lib = readImageFile(image("lib.cubin"));
  ASSERT_TRUE(!!lib) << errorText(lib);
  ASSERT_EQ(lib->images.size(), 1u);
  EXPECT_EQ(lib->images[0].format, ImageFormat::Cubin);
  EXPECT_EQ(lib->images[0].arch, "sm_90");
  EXPECT_EQ(lib->images[0].triple, "nvptx64-nvidia-cuda");
  EXPECT_EQ(symbolLines(lib->images[0]), (std::vector<std::string>{"D LibCounter", "T LibDeviceFunc"}));

  auto app = readImageFile(image("app.cubin"));
  ASSERT_TRUE(!!app) << errorText(app);
  EXPECT_EQ(symbolLines(app->images[0]), (std::vector<std::string>{"K AppKernel", "U LibDeviceFunc"}));
}

TEST(CubinReader, TruncatedCubinFailsCleanly) {
  DEVDL_REQUIRE_CUDA_IMAGES();
  const std::string bytes = readFile(image("lib.cubin"));
  for (size_t size = 20; size < bytes.size(); size += 97) {
    auto file = readImageMemory(asBytes(std::string_view(bytes).substr(0, size)), "cut.cubin", nullptr);
    EXPECT_FALSE(!!file) << "size " << size;
    if (!file) {
      EXPECT_NE(errorText(file).find("cut.cubin: image 0"), std::string::npos);
    }
  }
}

TEST(PtxReader, NvccOutput) {
  DEVDL_REQUIRE_CUDA_IMAGES();
  auto app = readImageFile(image("app.ptx"));
  ASSERT_TRUE(!!app) << errorText(app);
  EXPECT_EQ(app->images[0].format, ImageFormat::Ptx);
  EXPECT_EQ(app->images[0].arch, "sm_90");
  EXPECT_EQ(symbolLines(app->images[0]), (std::vector<std::string>{"K AppKernel", "U LibDeviceFunc"}));
}

constexpr std::string_view kPtx = R"(// hand-written
.version 8.0
.target sm_80, debug
.address_size 64

.extern .func (.param .b32 ret) imported_func (.param .b32 x);
.extern .global .align 4 .b32 imported_var;
.extern .func __internal_builtin ();
.visible .global .align 4 .b32 exported_var = 3;
.global .align 4 .b32 hidden_var;
.const .align 4 .b32 table[2] = {1, 2};
.visible .func (.param .b32 r) exported_func (.param .b32 x)
{
  /* a { brace in a comment */ ret;
}
.func local_func () { ret; }
.weak .func weak_func () { ret; }
.visible .entry the_kernel (.param .u64 out) { ret; }
)";

TEST(PtxReader, DirectivesAndLinkage) {
  auto file = readImageMemory(asBytes(kPtx), "hand.ptx", nullptr);
  ASSERT_TRUE(!!file) << errorText(file);
  const DeviceImage &ptx = file->images[0];
  EXPECT_EQ(ptx.arch, "sm_80");
  EXPECT_EQ(symbolLines(ptx),
            (std::vector<std::string>{"D exported_var", "K the_kernel", "T exported_func", "T weak_func",
                                      "U imported_func", "U imported_var"}));
}

TEST(PtxReader, BadTextIsRefused) {
  for (std::string_view bad : {std::string_view(".version 8.0\n.target sm_80\n/* open comment"),
                               std::string_view(".version 8.0\n.target sm_80\n.entry k () { ret;"),
                               std::string_view(".version 8.0\n")}) {
    auto file = readImageMemory(asBytes(bad), "bad.ptx", nullptr);
    ASSERT_FALSE(!!file) << bad;
    EXPECT_NE(errorText(file).find("bad.ptx: image 0 (ptx): invalid PTX"), std::string::npos);
  }
}

TEST(FatbinReader, ListsCubinAndPtxWithArch) {
  DEVDL_REQUIRE_CUDA_IMAGES();
  auto file = readImageFile(image("app.fatbin"));
  ASSERT_TRUE(!!file) << errorText(file);
  const DeviceImage &fat = file->images[0];
  EXPECT_EQ(fat.format, ImageFormat::Fatbin);
  EXPECT_EQ(symbolLines(fat), (std::vector<std::string>{"K AppKernel", "U LibDeviceFunc"}));
  Storage storage;
  auto members = readers::listFatbinMembers(fat.bytes, storage);
  ASSERT_TRUE(!!members) << errorText(members);
  ASSERT_EQ(members->size(), 2u);
  std::vector<std::string> seen;
  for (const auto &m : *members) {
    seen.push_back(std::string(formatName(m.format)) + " " + std::string(m.arch));
    EXPECT_FALSE(m.payload.empty());
    EXPECT_EQ(sniffFormat(m.payload), m.format) << "payload should be the decompressed image";
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::string>{"cubin sm_90", "ptx compute_90"}));
}

// A fat binary with one uncompressed PTX entry, laid out as nvcc does.
std::string makeFatbin(std::string_view ptx) {
  std::string entry(64, '\0');
  auto put16 = [&](size_t at, uint16_t v) { llvm::support::endian::write16le(&entry[at], v); };
  auto put32 = [&](size_t at, uint32_t v) { llvm::support::endian::write32le(&entry[at], v); };
  auto put64 = [&](size_t at, uint64_t v) { llvm::support::endian::write64le(&entry[at], v); };
  put16(0, 1);  // PTX
  put32(4, 64);
  put64(8, ptx.size());
  put32(28, 80);
  std::string header(16, '\0');
  llvm::support::endian::write32le(&header[0], 0xBA55ED50);
  llvm::support::endian::write16le(&header[4], 1);
  llvm::support::endian::write16le(&header[6], 16);
  llvm::support::endian::write64le(&header[8], entry.size() + ptx.size());
  return header + entry + std::string(ptx);
}

TEST(FatbinReader, SectionOfSeveralFatbinsIsSplit) {
  DEVDL_REQUIRE_CUDA_IMAGES();
  const std::string lib = readFile(image("lib.fatbin")), app = readFile(image("app.fatbin"));
  const std::string section = lib + std::string(8, '\0') + app + std::string(4, '\0');
  auto fatbins = readers::splitFatbins(asBytes(section));
  ASSERT_TRUE(!!fatbins) << errorText(fatbins);
  ASSERT_EQ(fatbins->size(), 2u);
  EXPECT_EQ(asText((*fatbins)[0]), lib);
  EXPECT_EQ(asText((*fatbins)[1]), app);
  // Something else after the first, or the second cut short: refused, naming the offset.
  auto garbage = readers::splitFatbins(asBytes(lib + "garbage!"));
  EXPECT_EQ(errorText(garbage), "invalid fatbin section: no fat binary at offset " + std::to_string(lib.size()));
  auto cut = readers::splitFatbins(asBytes(lib + app.substr(0, app.size() - 1)));
  EXPECT_EQ(errorText(cut), "invalid fatbin section: the fat binary at offset " + std::to_string(lib.size()) +
                                " runs past the end");
}

TEST(FatbinReader, HandBuiltFatbinReadsItsPtx) {
  const std::string fat = makeFatbin(kPtx);
  auto file = readImageMemory(asBytes(fat), "hand.fatbin", nullptr);
  ASSERT_TRUE(!!file) << errorText(file);
  EXPECT_EQ(file->images[0].arch, "compute_80");
  EXPECT_TRUE(contains(symbolLines(file->images[0]), "K the_kernel"));
}

TEST(FatbinReader, SizesOutOfRangeAreRefused) {
  const std::string good = makeFatbin(kPtx);
  struct Case {
    const char *what;
    size_t at;
    uint64_t value;
    int width;
  } cases[] = {
      {"body size past the end", 8, good.size(), 8},
      {"header size past the end", 6, 0xffff, 2},
      {"entry size past the end", 16 + 4, 1 << 20, 4},
      {"payload size past the end", 16 + 8, uint64_t(1) << 40, 8},
      {"payload size wraps", 16 + 8, ~uint64_t(0) - 10, 8},
  };
  for (const Case &c : cases) {
    std::string bad = good;
    if (c.width == 2) llvm::support::endian::write16le(&bad[c.at], static_cast<uint16_t>(c.value));
    if (c.width == 4) llvm::support::endian::write32le(&bad[c.at], static_cast<uint32_t>(c.value));
    if (c.width == 8) llvm::support::endian::write64le(&bad[c.at], c.value);
    auto file = readImageMemory(asBytes(bad), "bad.fatbin", nullptr);
    ASSERT_FALSE(!!file) << c.what;
    EXPECT_NE(errorText(file).find("bad.fatbin: image 0 (fatbin): invalid fatbin"), std::string::npos)
        << c.what;
  }
  for (size_t size = 1; size < good.size(); size += 5) {
    auto file = readImageMemory(asBytes(std::string_view(good).substr(0, size)), "cut.fatbin", nullptr);
    EXPECT_FALSE(!!file) << "size " << size;
  }
}

}  // namespace
}  // namespace devdl::test
