// Variables reached through cells (image/instance_cells.h) over real SPIR-V: the definition and
// the import become the cell's, everything else stays, the module validates and links; what
// cannot hold an address elsewhere is refused naming the variable.
#include "backend/spirv/link.h"
#include "image/instance_cells.h"
#include "image/read_image.h"
#include "support/error.h"
#include "support/spirv_tools.h"
#include "test_images.h"
#include "test_support.h"

#include <spirv-tools/libspirv.h>

#include <algorithm>
#include <filesystem>

namespace devdl::test {
namespace {

const std::vector<std::string_view> kState{"State"};

// Image 0 of test image `name`, and a copy reaching `names` through cells, read back.
struct Edited {
  ImageFile original, edited;
  std::string bytes;
};
Edited edit(const std::string &name, std::span<const std::string_view> names) {
  Edited result;
  auto file = readImageFile(image(name));
  EXPECT_TRUE(!!file) << errorText(file);
  if (!file) return result;
  result.original = std::move(*file);
  const DeviceImage &original = result.original.images[0];
  auto edited = withInstancesElsewhere(original.bytes, original.format, names);
  EXPECT_TRUE(!!edited) << errorText(edited);
  if (!edited) return result;
  result.bytes = std::move(*edited);
  auto reread = readImageMemory(asBytes(result.bytes), name, nullptr);
  EXPECT_TRUE(!!reread) << errorText(reread);
  if (reread) result.edited = std::move(*reread);
  return result;
}

bool validates(std::string_view bytes, std::string &why) {
  spirv::Context context;
  spv_const_binary_t binary{reinterpret_cast<const uint32_t *>(bytes.data()), bytes.size() / 4};
  spirv::Diagnostic diagnostic;
  const bool valid = spvValidate(context.get(), &binary, diagnostic.out()) == SPV_SUCCESS;
  if (!valid) why = diagnostic.text();
  return valid;
}

TEST(InstanceCells, TheDefinitionBecomesItsCell) {
  Edited lib = edit("gstate_lib.spv", kState);
  ASSERT_FALSE(lib.edited.images.empty());
  auto sorted = [](std::vector<std::string> lines) {
    std::sort(lines.begin(), lines.end());
    return lines;
  };
  EXPECT_EQ(sorted(symbolLines(lib.original.images[0])),
            (std::vector<std::string>{"D State", "K LibReadState", "K SetState", "T BumpState", "T ReadState"}));
  EXPECT_EQ(sorted(symbolLines(lib.edited.images[0])),
            (std::vector<std::string>{"D __devdl_instance_State", "K LibReadState", "K SetState", "T BumpState",
                                      "T ReadState"}));
  std::string why;
  EXPECT_TRUE(validates(lib.bytes, why)) << why;
}

TEST(InstanceCells, TheImportBecomesItsCellsAndLinksWithTheDefinition) {
  Edited reader = edit("gstate_read.spv", kState);
  ASSERT_FALSE(reader.edited.images.empty());
  // The cell's import is not listed (devdl's names, like the builtins', are no user's imports);
  // the link below finds it.
  EXPECT_EQ(symbolLines(reader.edited.images[0]), (std::vector<std::string>{"K ReadDirect", "K ReadKernel", "U ReadState"}));
  Edited lib = edit("gstate_lib.spv", kState);
  ASSERT_FALSE(lib.edited.images.empty());
  const DeviceImage *images[] = {&reader.edited.images[0], &lib.edited.images[0]};
  const std::string labels[] = {"gstate_read", "gstate_lib"};
  auto linked = backend::linkSpirv(images, labels, /*keepExports=*/true);
  ASSERT_TRUE(!!linked) << errorText(linked);
}

// PTX: the declaration becomes the cell's (8 bytes, no initializer: the instance has it), and
// each body that names the variable loads the cell's address into a register of its own at its
// start and uses that instead.
TEST(InstanceCells, PtxReachesTheVariableThroughARegisterLoadedFromTheCell) {
  DEVDL_REQUIRE_CUDA_IMAGES();
  Edited lib = edit("gstate_lib.ptx", kState);
  ASSERT_FALSE(lib.edited.images.empty());
  EXPECT_TRUE(llvm::is_contained(symbolLines(lib.edited.images[0]), "D __devdl_instance_State"));
  EXPECT_FALSE(llvm::is_contained(symbolLines(lib.edited.images[0]), "D State"));
  auto count = [](std::string_view text, std::string_view what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != text.npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(lib.bytes, ".visible .global .align 8 .u64 __devdl_instance_State;"), 1u);
  EXPECT_EQ(count(lib.bytes, "ld.global.u64 %devdl_cell0, [__devdl_instance_State];"), 4u)
      << "BumpState, ReadState, SetState and LibReadState name it";
  EXPECT_EQ(count(lib.bytes, "[State]"), 0u);
  EXPECT_EQ(count(lib.bytes, "[%devdl_cell0]"), count(asText(lib.original.images[0].bytes), "[State]"));
  Edited reader = edit("gstate_read.ptx", kState);
  ASSERT_FALSE(reader.edited.images.empty());
  EXPECT_EQ(count(reader.bytes, ".extern .global .align 8 .u64 __devdl_instance_State;"), 1u);
  EXPECT_EQ(count(reader.bytes, "ld.global.u64 %devdl_cell0, [__devdl_instance_State];"), 1u) << "ReadDirect";
}

TEST(InstanceCells, AnImageThatNamesNoneIsUnchanged) {
  auto file = readImageFile(image("app.spv"));
  ASSERT_TRUE(!!file) << errorText(file);
  auto edited = withInstancesElsewhere(file->images[0].bytes, ImageFormat::SpirV, kState);
  ASSERT_TRUE(!!edited) << errorText(edited);
  EXPECT_EQ(*edited, asText(file->images[0].bytes));
}

TEST(InstanceCells, AnAddressHeldByAnInitializerIsRefusedNamingTheVariable) {
  auto file = readImageFile(image("pointer_var.spv"));
  ASSERT_TRUE(!!file) << errorText(file);
  const std::vector<std::string_view> target{"Target"};
  EXPECT_EQ(errorText(withInstancesElsewhere(file->images[0].bytes, ImageFormat::SpirV, target)).rfind(
                "`Target`'s address is held by a constant or another variable's initializer", 0),
            0u);
}

// A module whose exported variable's instance is elsewhere has all its variables' there: a
// static one it writes would be a second instance, refused naming it (static_var_lib's Level).
TEST(InstanceCells, AVariableTheModuleKeepsToItselfIsRefusedNamingIt) {
  auto file = readImageFile(image("static_var_lib.spv"));
  ASSERT_TRUE(!!file) << errorText(file);
  const std::vector<std::string_view> scale{"Scale"};
  EXPECT_EQ(errorText(withInstancesElsewhere(file->images[0].bytes, ImageFormat::SpirV, scale)),
            "`Level`, a variable of its own that it does not export, would have a second instance in the program "
            "that reaches `Scale` in another: devdl reaches only exported variables so");
  if (!DEVDL_TEST_CUDA_IMAGES) return;
  auto ptx = readImageFile(image("static_var_lib.ptx"));
  ASSERT_TRUE(!!ptx) << errorText(ptx);
  const std::string why = errorText(withInstancesElsewhere(ptx->images[0].bytes, ImageFormat::Ptx, scale));
  EXPECT_NE(why.find("Level`, a variable of its own that it does not export, would have a second instance in the "
                     "program that reaches `Scale` in another"),
            std::string::npos)
      << why;
}

// A table of its own that the module only reads (nvcc writes a `static const __device__` array
// as .global, read through an address it computes) is no second instance of anything: the
// module is edited, the table left as it is.
TEST(InstanceCells, PtxReadingATableOfItsOwnIsEdited) {
  const std::string ptx = R"(.version 8.0
.target sm_90
.address_size 64
.global .align 4 .b8 Table[16] = {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4};
.visible .global .align 4 .u32 Exported = 1;
.visible .func (.param .b32 r) Get(.param .b32 i)
{
	.reg .b32 %r<4>;
	.reg .b64 %rd<3>;
	ld.param.u32 %r1, [i];
	mov.u64 %rd1, Table;
	ld.global.nc.u32 %r2, [%rd1];
	ld.global.u32 %r3, [Exported];
	st.param.b32 [r], %r2;
	ret;
}
)";
  const std::vector<std::string_view> exported{"Exported"};
  auto edited = withInstancesElsewhere(asBytes(ptx), ImageFormat::Ptx, exported);
  ASSERT_TRUE(!!edited) << errorText(edited);
  EXPECT_NE(edited->find("mov.u64 %rd1, Table;"), std::string::npos);
  EXPECT_NE(edited->find("ld.global.u32 %r3, [%devdl_cell0];"), std::string::npos);
}

// Every test image devdl reads (SPIR-V validated), its variables and imports reached through
// cells, reads again: the edit never makes a valid module invalid (the fuzzers check the same).
TEST(InstanceCells, EveryTestImageStaysValid) {
  size_t edited = 0;
  for (const auto &entry : std::filesystem::directory_iterator(image(""))) {
    const std::string extension = entry.path().extension().string();
    if (extension != ".spv" && extension != ".ptx") continue;
    auto file = readImageFile(entry.path().string());
    if (!file) {
      llvm::consumeError(file.takeError());  // the hostile ones
      continue;
    }
    for (const DeviceImage &original : file->images) {
      std::vector<std::string_view> names;
      for (const Symbol &s : original.symbols)
        if (s.kind == SymbolKind::Variable || s.kind == SymbolKind::Import) names.push_back(s.name);
      auto cells = withInstancesElsewhere(original.bytes, original.format, names);
      if (!cells) {
        llvm::Error refused = cells.takeError();
        EXPECT_TRUE(hasCode(refused, ErrorCode::Unsupported)) << entry.path();
        llvm::consumeError(std::move(refused));
        continue;
      }
      auto reread = readImageMemory(asBytes(*cells), entry.path().string(), nullptr);
      EXPECT_TRUE(!!reread) << entry.path() << ": " << errorText(reread);
      edited += *cells != asText(original.bytes);
    }
  }
  EXPECT_GT(edited, 10u);
}

// A module's statics, as readers name them and as a link exports them: two writable variables
// of one OpName and one of none; a Constant one and an exported one are no statics. Without the
// Linkage capability, the export goes, and the variable is a static: the export adds it.
constexpr std::string_view kStatics = R"(
OpCapability Addresses
OpCapability Kernel
OpCapability Int64
%linkage
OpMemoryModel Physical64 OpenCL
OpEntryPoint Kernel %k "k" %a %b %u %e
OpName %a "n"
OpName %b "n"
OpName %c "Table"
OpName %e "Exported"
OpDecorate %c Constant
%export
%uint = OpTypeInt 32 0
%void = OpTypeVoid
%ptr = OpTypePointer CrossWorkgroup %uint
%fn = OpTypeFunction %void
%zero = OpConstant %uint 0
%one = OpConstant %uint 1
%a = OpVariable %ptr CrossWorkgroup %zero
%b = OpVariable %ptr CrossWorkgroup %zero
%u = OpVariable %ptr CrossWorkgroup %zero
%c = OpVariable %ptr CrossWorkgroup %one
%e = OpVariable %ptr CrossWorkgroup %zero
%k = OpFunction %void None %fn
%l = OpLabel
OpStore %a %one
OpStore %b %one
OpStore %u %one
OpStore %e %one
OpReturn
OpFunctionEnd
)";

std::string assembled(bool linkage) {
  std::string text(kStatics);
  text.replace(text.find("%linkage"), 8, linkage ? "OpCapability Linkage" : "");
  text.replace(text.find("%export"), 7, linkage ? R"(OpDecorate %e LinkageAttributes "Exported" Export)" : "");
  spirv::Context context;
  spv_binary binary = nullptr;
  spv_diagnostic diagnostic = nullptr;
  EXPECT_EQ(spvTextToBinary(context.get(), text.data(), text.size(), &binary, &diagnostic), SPV_SUCCESS)
      << (diagnostic ? diagnostic->error : "");
  spvDiagnosticDestroy(diagnostic);
  if (!binary) return {};
  std::string bytes(reinterpret_cast<const char *>(binary->code), binary->wordCount * 4);
  spvBinaryDestroy(binary);
  return bytes;
}

TEST(InstanceCells, StaticsAreNamedApartAndExportedUnderTheirNames) {
  for (bool linkage : {true, false}) {
    const std::string bytes = assembled(linkage);
    auto read = readImageMemory(asBytes(bytes), "statics.spv", nullptr);
    ASSERT_TRUE(!!read) << errorText(read);
    const DeviceImage &module = read->images[0];
    // a, b and u; not the Constant table, nor the exported variable (a static where not exported).
    ASSERT_EQ(module.statics.size(), linkage ? 3u : 4u);
    EXPECT_TRUE(module.statics[0].starts_with("n.") && module.statics[1].starts_with("n.") &&
                module.statics[0] != module.statics[1]);
    EXPECT_TRUE(module.statics[2].starts_with(".")) << module.statics[2];
    std::vector<std::string> exported;
    for (std::string_view name : module.statics) exported.push_back(staticExportName(name, 0xfeed));
    EXPECT_EQ(exported[0], "__devdl_static_000000000000feed_" + std::string(module.statics[0]));
    auto edited = withStaticsExported(module.bytes, ImageFormat::SpirV, module.statics, exported);
    ASSERT_TRUE(!!edited) << errorText(edited);
    std::string why;
    EXPECT_TRUE(validates(*edited, why)) << (linkage ? "" : "the Linkage capability added: ") << why;
    auto reread = readImageMemory(asBytes(*edited), "statics.spv", nullptr);
    ASSERT_TRUE(!!reread) << errorText(reread);
    EXPECT_TRUE(reread->images[0].statics.empty());
    for (const std::string &name : exported)
      EXPECT_TRUE(llvm::is_contained(symbolLines(reread->images[0]), "D " + name)) << name;
    // And reached elsewhere, as any exported variable.
    const std::vector<std::string_view> names(exported.begin(), exported.end());
    auto cells = withInstancesElsewhere(asBytes(*edited), ImageFormat::SpirV, names);
    ASSERT_TRUE(!!cells) << errorText(cells);
    EXPECT_TRUE(validates(*cells, why)) << why;
  }
  const std::vector<std::string_view> none{"nothing"};
  const std::vector<std::string> as{"__devdl_static_0_nothing"};
  EXPECT_EQ(errorText(withStaticsExported(asBytes(assembled(true)), ImageFormat::SpirV, none, as)),
            "`nothing` is no static variable of the module");
}

// PTX: the static's every mention takes the exported name, its declaration `.visible`; the
// compiler's string literals ($str) are no statics.
TEST(InstanceCells, PtxStaticsAreExportedUnderTheirNames) {
  const std::string ptx = R"(.version 8.0
.target sm_90
.address_size 64
.global .align 4 .u32 _ZL5Count = 5;
.global .align 1 .b8 $str[3] = {104, 105, 0};
.visible .func (.param .b32 r) Bump()
{
	.reg .b32 %r<3>;
	ld.global.u32 %r1, [_ZL5Count];
	add.s32 %r2, %r1, 1;
	st.global.u32 [_ZL5Count], %r2;
	st.param.b32 [r], %r2;
	ret;
}
)";
  auto read = readImageMemory(asBytes(ptx), "statics.ptx", nullptr);
  ASSERT_TRUE(!!read) << errorText(read);
  ASSERT_EQ(read->images[0].statics, (std::vector<std::string_view>{"_ZL5Count"}));
  const std::vector<std::string> exported{staticExportName("_ZL5Count", 1)};
  auto edited = withStaticsExported(asBytes(ptx), ImageFormat::Ptx, read->images[0].statics, exported);
  ASSERT_TRUE(!!edited) << errorText(edited);
  EXPECT_NE(edited->find(".visible .global .align 4 .u32 " + exported[0] + " = 5;"), std::string::npos) << *edited;
  EXPECT_NE(edited->find("st.global.u32 [" + exported[0] + "], %r2;"), std::string::npos) << *edited;
  EXPECT_EQ(edited->find("[_ZL5Count]"), std::string::npos) << *edited;
  auto reread = readImageMemory(asBytes(*edited), "statics.ptx", nullptr);
  ASSERT_TRUE(!!reread) << errorText(reread);
  EXPECT_TRUE(reread->images[0].statics.empty());
  EXPECT_TRUE(llvm::is_contained(symbolLines(reread->images[0]), "D " + exported[0]));
}

// The suite's library of one static, as every compiler here writes it.
TEST(InstanceCells, TheSuitesStaticIsReadInEveryFormat) {
  std::vector<std::string> files{"gstatic_lib.spv", "gstatic_lib.bc"};
  if (DEVDL_TEST_CUDA_IMAGES) files.insert(files.end(), {"gstatic_lib.ptx", "gstatic_lib.cubin", "gstatic_lib.fatbin"});
  for (const std::string &name : files) {
    auto file = readImageFile(image(name));
    ASSERT_TRUE(!!file) << errorText(file);
    const std::vector<std::string_view> &statics = file->images[0].statics;
    ASSERT_EQ(statics.size(), 1u) << name << ": " << statics.size();
    EXPECT_TRUE(statics[0].ends_with("Count")) << name << ": " << statics[0];  // nvcc's is unique to the file
  }
}

TEST(InstanceCells, OtherFormatsAreRefusedNamingTheVariable) {
  EXPECT_EQ(errorText(withInstancesElsewhere(Bytes(), ImageFormat::OpenClBinary, kState)),
            "`State` cannot be reached in another program from an image of format opencl-binary: devdl rewrites "
            "SPIR-V and PTX for that");
}

}  // namespace
}  // namespace devdl::test
