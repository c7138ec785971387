// devdl-nm, run as a program on the test images.
#include "devdl.h"
#include "test_support.h"

#include <llvm/Support/JSON.h>

namespace devdl::test {
namespace {

std::string field(const llvm::json::Object *object, llvm::StringRef key) {
  auto value = object->getString(key);
  return value ? value->str() : "<no " + key.str() + ">";
}

TEST(DevdlNm, SeedExampleExportAndImportWithoutBuiltins) {
  CommandResult lib = run({DEVDL_NM, image("lib.spv")});
  EXPECT_EQ(lib.status, 0) << lib.err;
  EXPECT_EQ(linesOf(lib.out), (std::vector<std::string>{"D LibCounter", "T LibDeviceFunc", "T _Z8LibScalei"}));
  CommandResult app = run({DEVDL_NM, image("app.spv")});
  EXPECT_EQ(app.status, 0) << app.err;
  EXPECT_EQ(linesOf(app.out), (std::vector<std::string>{"K AppKernel", "U LibDeviceFunc"}));
  EXPECT_EQ(app.out.find("__spirv"), std::string::npos);
}

TEST(DevdlNm, FilterAndDemangleOptions) {
  CommandResult u = run({DEVDL_NM, "-u", image("app.spv")});
  EXPECT_EQ(linesOf(u.out), std::vector<std::string>{"U LibDeviceFunc"});
  CommandResult defined = run({DEVDL_NM, "--defined-only", image("app.spv")});
  EXPECT_EQ(linesOf(defined.out), std::vector<std::string>{"K AppKernel"});
  CommandResult demangled = run({DEVDL_NM, "-C", image("lib.spv")});
  EXPECT_TRUE(contains(linesOf(demangled.out), "T LibScale(int)")) << demangled.out;
  CommandResult both = run({DEVDL_NM, "-u", "--defined-only", image("app.spv")});
  EXPECT_EQ(both.status, 1);
}

TEST(DevdlNm, SeveralFilesAreLabelledAndAFailureSetsTheStatus) {
  CommandResult r = run({DEVDL_NM, image("lib.spv"), "/nonexistent.spv", image("app.spv")});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "devdl-nm: /nonexistent.spv: No such file or directory\n");
  EXPECT_NE(r.out.find("\n" + image("lib.spv") + ":\nD LibCounter\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n" + image("app.spv") + ":\nK AppKernel\nU LibDeviceFunc\n"), std::string::npos) << r.out;
}

TEST(DevdlNm, JsonListsImagesSymbolsAndProperties) {
  CommandResult r = run({DEVDL_NM, "--json", "--properties", image("spec_constants.spv"), image("app.bc")});
  ASSERT_EQ(r.status, 0) << r.err;
  auto parsed = llvm::json::parse(r.out);
  ASSERT_TRUE(!!parsed) << llvm::toString(parsed.takeError());
  const llvm::json::Array *files = parsed->getAsArray();
  ASSERT_TRUE(files && files->size() == 2);
  const llvm::json::Object *spec = (*files)[0].getAsObject();
  EXPECT_EQ(field(spec, "file"), image("spec_constants.spv"));
  const llvm::json::Object *img = (*spec->getArray("images"))[0].getAsObject();
  EXPECT_EQ(field(img, "format"), "spirv");
  const llvm::json::Array *symbols = img->getArray("symbols");
  ASSERT_EQ(symbols->size(), 2u);
  EXPECT_EQ(field((*symbols)[0].getAsObject(), "name"), "ScaleKernel");
  EXPECT_EQ(field((*symbols)[0].getAsObject(), "kind"), "kernel");
  const llvm::json::Array *specSet =
      img->getObject("properties")->getArray("SYCL/specialization constants");
  ASSERT_TRUE(specSet && specSet->size() == 2);
  EXPECT_EQ((*specSet)[0].getAsObject()->getInteger("value").value_or(-1), 3);
  const llvm::json::Object *bc = (*(*files)[1].getAsObject()->getArray("images"))[0].getAsObject();
  EXPECT_EQ(field(bc, "format"), "spir-bc");
}

TEST(DevdlNm, CudaImages) {
  DEVDL_REQUIRE_CUDA_IMAGES();
  // app.lto.fatbin: nvcc -rdc=true -dlto -fatbin, LTO-IR beside PTX (refused before: "entry at
  // offset 456 has bad sizes").
  for (const char *name : {"app.cubin", "app.ptx", "app.fatbin", "app.lto.fatbin"}) {
    CommandResult r = run({DEVDL_NM, image(name)});
    EXPECT_EQ(r.status, 0) << name << ": " << r.err;
    EXPECT_EQ(linesOf(r.out), (std::vector<std::string>{"K AppKernel", "U LibDeviceFunc"})) << name;
  }
  CommandResult lib = run({DEVDL_NM, image("lib.cubin")});
  EXPECT_EQ(linesOf(lib.out), (std::vector<std::string>{"D LibCounter", "T LibDeviceFunc"}));
  CommandResult pack = run({DEVDL_PACK, "--check", image("app.lto.fatbin"), image("lib.lto.fatbin")});
  EXPECT_EQ(pack.status, 0) << pack.out << pack.err;
}

// Intel native binaries from ocloc: their symbols are those of the SPIR-V they carry, their
// target the GPU family they were built for; devdl-pack packs them as they are.
TEST(DevdlNm, IntelNativeImages) {
  DEVDL_REQUIRE_INTEL_IMAGES();
  CommandResult lib = run({DEVDL_NM, image("lib.gen12lp.bin")});
  EXPECT_EQ(lib.status, 0) << lib.err;
  EXPECT_EQ(linesOf(lib.out), (std::vector<std::string>{"D LibCounter", "T LibDeviceFunc", "T _Z8LibScalei"}));
  const std::string bundle = scratchDir() + "/intel.devdl";
  CommandResult pack = run({DEVDL_PACK, "-o", bundle, image("app.gen12lp.bin"), image("lib.dg2.bin")});
  ASSERT_EQ(pack.status, 0) << pack.err;
  CommandResult listed = run({DEVDL_NM, bundle});
  EXPECT_EQ(listed.status, 0) << listed.err;
  EXPECT_NE(listed.out.find("(image 0, intel-native, spir64_gen-unknown-unknown gen12lp):\nK AppKernel\nU LibDeviceFunc\n"),
            std::string::npos)
      << listed.out;
  EXPECT_NE(listed.out.find("(image 1, intel-native, spir64_gen-unknown-unknown "), std::string::npos) << listed.out;
  CommandResult check = run({DEVDL_PACK, "--check", image("app.gen12lp.bin"), image("lib.gen12lp.bin")});
  EXPECT_EQ(check.status, 0) << check.out << check.err;
}

TEST(DevdlNm, NvccHostObjectBuiltWithRdc) {
  DEVDL_REQUIRE_CUDA_IMAGES();
  // nvcc -rdc=true -c: the device code is a fat binary in the host object's __nv_relfatbin.
  CommandResult r = run({DEVDL_NM, image("lib_rdc.o")});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(linesOf(r.out), (std::vector<std::string>{"D LibCounter", "T LibDeviceFunc"}));
  CommandResult check = run({DEVDL_PACK, "--check", image("app.cubin"), image("lib_rdc.o")});
  EXPECT_EQ(check.status, 0) << check.out << check.err;
}

TEST(DevdlNm, SharedLibraryCarryingABundle) {
  CommandResult r = run({DEVDL_NM, "--properties", DEVDL_TEST_LINKED});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("(image 0, spirv, spir64-unknown-unknown):\nD LibCounter\nT LibDeviceFunc\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("[devdl/module]\n  id = \"liblinked\"\n"), std::string::npos) << r.out;
  CommandResult plain = run({DEVDL_NM, DEVDL_TEST_PLAIN});
  EXPECT_EQ(plain.status, 1);
  EXPECT_NE(plain.err.find("carries no device images"), std::string::npos);
}

// Names of files reach the terminal too, in the "file:" headers and in errors: a control
// character in one is written as an escape, as in symbol names.
TEST(DevdlNm, ControlCharactersInFileNamesAreEscaped) {
  const std::string dir = scratchDir();
  writeFile(dir + "/lib\r\x1b[2J.spv", readFile(image("lib.spv")));
  CommandResult r = run({DEVDL_NM, dir + "/lib\r\x1b[2J.spv", dir + "/gone\nT Forged", image("app.spv")});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "devdl-nm: " + dir + "/gone\\nT Forged: No such file or directory\n");
  EXPECT_NE(r.out.find("\n" + dir + "/lib\\r\\x1b[2J.spv:\nD LibCounter\n"), std::string::npos) << r.out;
}

// A file of three images whose middle one cannot be read (garbage SPIR-V in an envelope of
// LLVM's, read from its bytes): the other two are listed, the middle one named on stderr, and the
// status is 1, as nm goes on past a bad archive member.
TEST(DevdlNm, ListsTheImagesOfAFilePastOneItCannotRead) {
  const std::string path = scratchDir() + "/three.devdl";
  writeFile(path, bundleWithAnUnreadableImage());
  CommandResult r = run({DEVDL_NM, path});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("(image 0, spirv, spir64-unknown-unknown):\nD LibCounter\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(image 2, spirv, spir64-unknown-unknown):\nK AppKernel\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("(image 1"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.rfind("devdl-nm: " + path + ": image 1 (at offset ", 0), 0u) << r.err;
}

TEST(DevdlNm, BadInputNeverCrashes) {
  const std::string dir = scratchDir();
  const std::string spirv = readFile(image("app.spv"));
  writeFile(dir + "/empty", "");
  writeFile(dir + "/cut.spv", spirv.substr(0, spirv.size() / 2));
  writeFile(dir + "/magic.devdl", std::string("\x10\xff\x10\xad", 4) + std::string(60, '\x7f'));
  for (const char *name : {"empty", "cut.spv", "magic.devdl"}) {
    CommandResult r = run({DEVDL_NM, dir + "/" + name});
    EXPECT_EQ(r.status, 1) << name;
    EXPECT_EQ(r.err.rfind("devdl-nm: " + dir + "/" + name + ": ", 0), 0u) << r.err;
  }
}

}  // namespace
}  // namespace devdl::test

namespace devdl::test {
namespace {

// Every tool says which devdl it is (not LLVM's version, which --version printed before), what
// its SPIR-V reaches, and how it is used, and exits 0 for both.
TEST(Tools, VersionAndHelp) {
  for (const std::string &tool : {std::string(DEVDL_NM), std::string(DEVDL_PACK), std::string(DEVDL_CACHE_TOOL)}) {
    const std::string name = tool.substr(tool.rfind('/') + 1);
    CommandResult version = run({tool, "--version"});
    EXPECT_EQ(version.status, 0) << name << version.err;
    EXPECT_EQ(version.out.rfind(name + " (devdl " + std::to_string(DEVDL_VERSION_MAJOR) + ".", 0), 0u)
        << name << ": " << version.out;
    // This build has the translator: it says what that serves (the wheel's says it has none).
    EXPECT_NE(version.out.find("SPIR-V is translated to SPIR"), std::string::npos) << name << ": " << version.out;
    CommandResult help = run({tool, "--help"});
    EXPECT_EQ(help.status, 0) << name << help.err;
    EXPECT_NE(help.out.find(name), std::string::npos) << name << ": " << help.out;
  }
}

// Each tool's manual page (docs/man, scdoc) names every option its --help lists, so that the
// two cannot drift apart.
TEST(Tools, ManualPagesNameEveryOption) {
  const std::string man = std::string(DEVDL_TEST_DATA) + "/../../docs/man/";
  for (const std::string &tool : {std::string(DEVDL_NM), std::string(DEVDL_PACK), std::string(DEVDL_CACHE_TOOL)}) {
    const std::string name = tool.substr(tool.rfind('/') + 1);
    const std::string page = readFile(man + name + ".1.scd");
    ASSERT_FALSE(page.empty()) << name;
    const std::string help = run({tool, "--help"}).out;
    size_t listed = 0;
    for (size_t at = help.find("\n  -"); at != std::string::npos; at = help.find("\n  -", at + 1)) {
      const size_t start = help.find('-', at);
      const std::string option = help.substr(start, help.find_first_of(" =\n", start) - start);
      if (option == "--help-list") continue;  // LLVM's own
      ++listed;
      EXPECT_NE(page.find("*" + option + "*"), std::string::npos) << name << ": " << option;
    }
    EXPECT_GT(listed, 2u) << name;
  }
}

}  // namespace
}  // namespace devdl::test
