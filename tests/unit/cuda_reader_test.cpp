// NVIDIA formats: cubin and PTX from nvcc -rdc (skipped without a CUDA toolkit), hand-written
// PTX, and fat binaries including hostile ones built here.
#include "image/read_image.h"
#include "image/readers.h"
#include "test_support.h"

#include <llvm/Support/Endian.h>
#include <llvm/Support/MathExtras.h>

#include <unistd.h>
#include <zstd.h>

#include <fstream>

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

// What the CUDA toolchain provides is no image's to define: device printf, malloc and free (the
// driver's linker), dynamic parallelism's calls (the device runtime, which the link adds) are
// weak imports, left to the link where no image defines them; shared memory (an extern
// __shared__ array, a __shared__ variable) is neither an import nor a variable. A kernel launched
// from the device of another image is imported, in the cubin and in the PTX.
TEST(CubinReader, WhatTheToolchainProvidesIsWeakAndSharedMemoryIsNoSymbol) {
  DEVDL_REQUIRE_CUDA_IMAGES();
  for (const char *name : {"toolchain_app.cubin", "toolchain_app.ptx", "toolchain_app.fatbin"}) {
    auto app = readImageFile(image(name));
    ASSERT_TRUE(!!app) << errorText(app);
    EXPECT_EQ(symbolLines(app->images[0]),
              (std::vector<std::string>{"K ParentKernel", "K ScratchKernel", "U ChildKernel",
                                        "w __cudaCDP2GetParameterBufferV2", "w __cudaCDP2LaunchDeviceV2", "w free",
                                        "w malloc", "w vprintf"}))
        << name;
  }
  for (const char *name : {"toolchain_lib.cubin", "toolchain_lib.ptx"}) {
    auto lib = readImageFile(image(name));
    ASSERT_TRUE(!!lib) << errorText(lib);
    EXPECT_EQ(symbolLines(lib->images[0]), (std::vector<std::string>{"K ChildKernel"})) << name;
  }
}

TEST(CudaNames, TheToolchainsProvidersAreTheDriverAndTheDeviceRuntime) {
  for (const char *name : {"vprintf", "malloc", "free"}) EXPECT_EQ(cudaProviderOf(name), CudaProvider::Driver) << name;
  for (const char *name : {"__cudaCDP2LaunchDeviceV2", "cudaGraphSetConditional", "cudaGetParameterBuffer",
                           "cudaDeviceSynchronize"})
    EXPECT_EQ(cudaProviderOf(name), CudaProvider::DeviceRuntime) << name;
  for (const char *name : {"mallocx", "cuda", "cudahelper", "LibDeviceFunc", "_Z4freei"})
    EXPECT_EQ(cudaProviderOf(name), CudaProvider::Image) << name;
  EXPECT_EQ(cudaImport("__nv_reserved"), std::nullopt);
  EXPECT_FALSE(cudaImport("LibDeviceFunc")->weak);
  EXPECT_TRUE(cudaImport("cudaGraphLaunch")->weak);
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
  // and } one in a line comment
  { .reg .b32 %inner; }  // a nested block
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
                               std::string_view(".version 8.0\n.target sm_80\n.entry k () { { ret; }"),
                               std::string_view(".version 8.0\n.target sm_80\n.entry k () { /* } */"),
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
    auto bytes = readers::fatbinMemberImage(m, storage);
    ASSERT_TRUE(!!bytes) << errorText(bytes);
    EXPECT_EQ(sniffFormat(*bytes), m.format) << "the member's image should be the inflated one";
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::string>{"cubin sm_90", "ptx compute_90"}));
}

// One entry of a fat binary built here: `payload` as stored, compressed where `flags` say so.
struct TestMember {
  uint16_t kind = 1;  // PTX
  uint32_t arch = 80;
  std::string payload;
  uint64_t flags = 0;
  uint64_t inflatedSize = 0;
};

constexpr uint64_t kZstd = 0x8000;

// A fat binary of `members`, laid out as nvcc does.
std::string makeFatbin(const std::vector<TestMember> &members) {
  std::string body;
  for (const TestMember &m : members) {
    std::string entry(64, '\0');
    std::string payload = m.payload;
    payload.resize(llvm::alignTo(payload.size(), 8), '\0');
    llvm::support::endian::write16le(&entry[0], m.kind);
    llvm::support::endian::write32le(&entry[4], 64);
    llvm::support::endian::write64le(&entry[8], payload.size());
    llvm::support::endian::write32le(&entry[16], static_cast<uint32_t>(m.payload.size()));
    llvm::support::endian::write32le(&entry[28], m.arch);
    llvm::support::endian::write64le(&entry[40], m.flags);
    llvm::support::endian::write64le(&entry[56], m.inflatedSize);
    body += entry + payload;
  }
  std::string header(16, '\0');
  llvm::support::endian::write32le(&header[0], 0xBA55ED50);
  llvm::support::endian::write16le(&header[4], 1);
  llvm::support::endian::write16le(&header[6], 16);
  llvm::support::endian::write64le(&header[8], body.size());
  return header + body;
}

// A fat binary with one uncompressed PTX entry.
std::string makeFatbin(std::string_view ptx) { return makeFatbin({{1, 80, std::string(ptx)}}); }

// `content` as one zstd frame that records its size, as nvcc's do.
std::string zstdFrame(std::string_view content) {
  std::string frame(ZSTD_compressBound(content.size()), '\0');
  const size_t size = ZSTD_compress(frame.data(), frame.size(), content.data(), content.size(), 1);
  frame.resize(ZSTD_isError(size) ? 0 : size);
  return frame;
}

// What the process has in memory now (not its peak, which earlier tests may have set).
uint64_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

TEST(FatbinReader, LtoIrIsListedAndItsSymbolsAreThePtxs) {
  // What nvcc -rdc=true -dlto -arch=sm_90 -fatbin writes: PTX and LTO-IR, each compressed (the
  // LTO-IR not as zstd; devdl-nm refused it: "entry at offset 456 has bad sizes").
  DEVDL_REQUIRE_CUDA_IMAGES();
  auto file = readImageFile(image("lib.lto.fatbin"));
  ASSERT_TRUE(!!file) << errorText(file);
  const DeviceImage &fat = file->images[0];
  EXPECT_EQ(fat.arch, "compute_90,lto_90");
  EXPECT_EQ(symbolLines(fat), (std::vector<std::string>{"D LibCounter", "T LibDeviceFunc"}));
  Storage storage;
  auto members = readers::listFatbinMembers(fat.bytes, storage);
  ASSERT_TRUE(!!members) << errorText(members);
  ASSERT_EQ(members->size(), 2u);
  EXPECT_EQ((*members)[1].format, ImageFormat::LtoIr);
  EXPECT_FALSE((*members)[1].readable()) << "only nvJitLink reads LTO-IR";
}

TEST(FatbinReader, LtoIrAloneIsRefusedSayingHowToBuildIt) {
  DEVDL_REQUIRE_CUDA_IMAGES();
  auto bare = readImageFile(image("lib.ltoir"));
  const std::string refused = errorText(bare);
  EXPECT_EQ(refused.find(image("lib.ltoir") + ": image 0 (ltoir): lto_90 alone: its symbols are in NVIDIA's encoding"),
            0u)
      << refused;
  EXPECT_NE(refused.find("-dlto -arch=sm_NN -fatbin"), std::string::npos) << refused;
  // A fat binary of LTO-IR alone (nvcc -arch=lto_90): the same, for the same reason.
  const std::string ltoIr = readFile(image("lib.ltoir"));
  const std::string fat = makeFatbin({{8, 90, ltoIr}});
  auto file = readImageMemory(asBytes(fat), "lto-only.fatbin", nullptr);
  EXPECT_NE(errorText(file).find("fatbin holds LTO-IR alone (lto_90)"), std::string::npos) << errorText(file);
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

// A fat binary of a small PTX member and three of 128 MiB (zeros, each a 4 KB zstd frame): a
// reader inflated every member, 384 MiB for a file of 13 KB, though it takes the symbols of one.
TEST(FatbinReader, OnlyTheMemberReadIsInflated) {
  constexpr uint64_t kBomb = uint64_t(128) << 20;
  const std::string small = zstdFrame(kPtx), bomb = zstdFrame(std::string(kBomb, '\0'));
  std::vector<TestMember> members{{1, 80, small, kZstd, kPtx.size()}};
  for (uint32_t arch : {86, 89, 90}) members.push_back({1, arch, bomb, kZstd, kBomb});
  const std::string fat = makeFatbin(members);

  Storage storage;
  auto listed = readers::listFatbinMembers(asBytes(fat), storage);
  ASSERT_TRUE(!!listed) << errorText(listed);
  ASSERT_EQ(listed->size(), 4u);
  for (const readers::FatbinMember &m : *listed) {
    const char *payload = asText(m.payload).data();
    EXPECT_TRUE(payload >= fat.data() && payload + m.payload.size() <= fat.data() + fat.size())
        << m.arch << ": listed as stored, not inflated";
  }
  EXPECT_EQ((*listed)[3].size, kBomb);
  auto inflated = readers::fatbinMemberImage((*listed)[0], storage);
  ASSERT_TRUE(!!inflated) << errorText(inflated);
  EXPECT_EQ(asText(*inflated), kPtx);

  const uint64_t before = residentBytes();
  auto file = readImageMemory(asBytes(fat), "bomb.fatbin", nullptr);
  ASSERT_TRUE(!!file) << errorText(file);
  EXPECT_LT(residentBytes() - before, kBomb / 2) << "more than the member read was inflated";
  EXPECT_EQ(file->images[0].arch, "compute_80,compute_86,compute_89,compute_90");
  EXPECT_TRUE(contains(symbolLines(file->images[0]), "K the_kernel"));
}

// A member whose zstd frame says it inflates past the bound (a frame header alone: nothing is
// inflated to find out) is refused when read, naming the bound and the entry.
TEST(FatbinReader, InflatingPastTheBoundIsRefusedNamingIt) {
  const uint64_t claimed = readers::kMaxFatbinInflation + 1;
  std::string header = {'\x28', '\xb5', '\x2f', '\xfd', '\xe0'};  // magic; single segment, 8-byte content size
  header.resize(13);
  llvm::support::endian::write64le(&header[5], claimed);
  const std::string ptx = zstdFrame(kPtx);
  const std::string fat = makeFatbin({{1, 80, ptx, kZstd, kPtx.size()}, {2, 90, header, kZstd, claimed}});
  auto file = readImageMemory(asBytes(fat), "bomb.fatbin", nullptr);
  ASSERT_FALSE(!!file);
  const size_t cubinEntry = 16 + 64 + llvm::alignTo(ptx.size(), 8);
  EXPECT_EQ(errorText(file), "bomb.fatbin: image 0 (fatbin): fatbin entry at offset " +
                                 std::to_string(cubinEntry) + " inflates to " +
                                 std::to_string(claimed) + " bytes, past the bound of " +
                                 std::to_string(readers::kMaxFatbinInflation) +
                                 " bytes on what one fat binary inflates");
}

}  // namespace
}  // namespace devdl::test
