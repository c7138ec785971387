// Interposition's image edits: a definition made local in a copy, for each format a link takes.
// Each edited copy is read back: the name is no longer exported, everything else is as it was.
#include "image/local_definitions.h"
#include "image/read_image.h"
#include "test_support.h"

namespace devdl::test {
namespace {

// The symbols of `name`'s image, and of a copy with `interposed` made local, as devdl-nm lists them.
std::pair<std::vector<std::string>, std::vector<std::string>> beforeAndAfter(const std::string &name,
                                                                            std::vector<std::string_view> interposed) {
  auto file = readImageFile(image(name));
  EXPECT_TRUE(!!file) << errorText(file);
  if (!file) return {};
  const DeviceImage &original = file->images[0];
  auto edited = withLocalDefinitions(original.bytes, original.format, interposed);
  EXPECT_TRUE(!!edited) << errorText(edited);
  if (!edited) return {};
  auto reread = readImageMemory(asBytes(*edited), name, nullptr);
  EXPECT_TRUE(!!reread) << errorText(reread);
  if (!reread) return {};
  EXPECT_EQ(reread->images[0].format, original.format);
  return {symbolLines(original), symbolLines(reread->images[0])};
}

TEST(LocalDefinitions, SpirvLosesTheExportLinkage) {
  auto [before, after] = beforeAndAfter("interpose_other.spv", {"Answer"});
  EXPECT_EQ(before, (std::vector<std::string>{"T Answer", "T Other"}));
  EXPECT_EQ(after, (std::vector<std::string>{"T Other"}));
  // Imports and kernels stay: lib.spv's variable made local, its functions kept.
  auto [libBefore, libAfter] = beforeAndAfter("lib.spv", {"LibCounter"});
  EXPECT_EQ(libAfter, (std::vector<std::string>{"T LibDeviceFunc", "T _Z8LibScalei"}));
  auto [appBefore, appAfter] = beforeAndAfter("app.spv", {"LibDeviceFunc"});
  EXPECT_EQ(appAfter, appBefore) << "an import is no definition";
}

// Its name goes with its linkage: the program it is linked into must not answer to the name for
// the other image's definition (the host reads a variable by name).
TEST(LocalDefinitions, SpirvLosesTheNameOfWhatItMakesLocal) {
  auto file = readImageFile(image("interpose_other.spv"));
  ASSERT_TRUE(!!file) << errorText(file);
  auto edited = withLocalDefinitions(file->images[0].bytes, ImageFormat::SpirV, std::vector<std::string_view>{"Answer"});
  ASSERT_TRUE(!!edited) << errorText(edited);
  auto contains = [](std::string_view bytes, std::string_view text) { return bytes.find(text) != bytes.npos; };
  EXPECT_TRUE(contains(asText(file->images[0].bytes), "Answer"));
  EXPECT_FALSE(contains(*edited, "Answer")) << "neither as OpName nor as linkage";
  EXPECT_TRUE(contains(*edited, "Other"));
}

TEST(LocalDefinitions, CubinSymbolsBecomeLocal) {
  DEVDL_REQUIRE_CUDA_IMAGES();
  auto [before, after] = beforeAndAfter("interpose_other.cubin", {"Answer"});
  EXPECT_EQ(before, (std::vector<std::string>{"T Answer", "T Other"}));
  EXPECT_EQ(after, (std::vector<std::string>{"T Other"}));
  auto [appBefore, appAfter] = beforeAndAfter("interpose_app.cubin", {"Answer"});
  EXPECT_EQ(appAfter, appBefore) << "an import is no definition";
}

TEST(LocalDefinitions, PtxLosesVisible) {
  DEVDL_REQUIRE_CUDA_IMAGES();
  auto [before, after] = beforeAndAfter("interpose_other.ptx", {"Answer"});
  EXPECT_EQ(before, (std::vector<std::string>{"T Answer", "T Other"}));
  EXPECT_EQ(after, (std::vector<std::string>{"T Other"}));
  auto [libBefore, libAfter] = beforeAndAfter("lib.ptx", {"LibCounter"});
  EXPECT_FALSE(contains(libAfter, "D LibCounter"));
  EXPECT_TRUE(contains(libAfter, "T LibDeviceFunc"));
}

TEST(LocalDefinitions, FormatsWithoutASymbolTableToEditAreRefused) {
  auto file = readImageFile(image("lib.bc"));
  ASSERT_TRUE(!!file) << errorText(file);
  const std::string_view names[] = {"LibDeviceFunc"};
  auto edited = withLocalDefinitions(file->images[0].bytes, file->images[0].format, names);
  ASSERT_FALSE(!!edited);
  EXPECT_EQ(errorText(edited),
            "cannot make `LibDeviceFunc` local in an image of format spir-bc: another image's definition is the one "
            "used");
}

}  // namespace
}  // namespace devdl::test
