// SPIR images (LLVM bitcode from clang-15 -target spir64): symbols from the module's
// declarations, OpenCL builtins filtered out of the imports.
#include "image/read_image.h"
#include "test_support.h"

namespace devdl::test {
namespace {

TEST(BitcodeReader, LibraryAndAppSymbols) {
  auto lib = readImageFile(image("lib.bc"));
  ASSERT_TRUE(!!lib) << errorText(lib);
  ASSERT_EQ(lib->images.size(), 1u);
  EXPECT_EQ(lib->images[0].format, ImageFormat::SpirBitcode);
  EXPECT_EQ(lib->images[0].triple, "spir64");
  EXPECT_EQ(symbolLines(lib->images[0]),
            (std::vector<std::string>{"D LibCounter", "T LibDeviceFunc", "T _Z8LibScalei"}));

  auto app = readImageFile(image("app.bc"));
  ASSERT_TRUE(!!app) << errorText(app);
  // get_global_id is declared in the module (as _Z13get_global_idm) but is a builtin.
  EXPECT_NE(readFile(image("app.bc")).find("get_global_id"), std::string::npos);
  EXPECT_EQ(symbolLines(app->images[0]), (std::vector<std::string>{"K AppKernel", "U LibDeviceFunc"}));
}

TEST(BitcodeReader, CorruptBitcodeIsRefused) {
  std::string bytes = readFile(image("app.bc"));
  for (size_t i = 40; i < bytes.size(); i += 7) bytes[i] = static_cast<char>(bytes[i] ^ 0x5a);
  auto file = readImageMemory(asBytes(bytes), "corrupt.bc", nullptr);
  ASSERT_FALSE(!!file);
  EXPECT_NE(errorText(file).find("corrupt.bc: image 0 (spir-bc): invalid LLVM bitcode"), std::string::npos);
}

TEST(BitcodeReader, TruncatedBitcodeIsRefused) {
  const std::string bytes = readFile(image("lib.bc"));
  // The string table comes last; a cut in its final padding loses nothing, a cut in its text does.
  for (size_t size : {size_t(4), size_t(8), bytes.size() / 2, bytes.size() - 16}) {
    auto file = readImageMemory(asBytes(std::string_view(bytes).substr(0, size)), "cut.bc", nullptr);
    EXPECT_FALSE(!!file) << "size " << size;
    if (!file) {
      EXPECT_NE(errorText(file).find("cut.bc"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace devdl::test
