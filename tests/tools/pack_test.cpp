// devdl-pack, run as a program: bundles, host objects, ELF copies, properties and --check.
#include "test_support.h"

#include <filesystem>

namespace devdl::test {
namespace {

TEST(DevdlPack, BundleRoundTripGivesTheDerivedLists) {
  const std::string dir = scratchDir();
  const std::string out = dir + "/seed.devdl";
  CommandResult pack = run({DEVDL_PACK, "-o", out, image("lib.spv"), image("app.spv")});
  ASSERT_EQ(pack.status, 0) << pack.err;
  CommandResult nm = run({DEVDL_NM, out});
  ASSERT_EQ(nm.status, 0) << nm.err;
  EXPECT_EQ(nm.out,
            "\n" + out + "(image 0, spirv, spir64-unknown-unknown):\nD LibCounter\nT LibDeviceFunc\nT _Z8LibScalei\n"
            "\n" + out + "(image 1, spirv, spir64-unknown-unknown):\nK AppKernel\nU LibDeviceFunc\n");
  // Same input, same bytes.
  CommandResult again = run({DEVDL_PACK, "-o", dir + "/again.devdl", image("lib.spv"), image("app.spv")});
  ASSERT_EQ(again.status, 0);
  EXPECT_EQ(readFile(out), readFile(dir + "/again.devdl"));
}

TEST(DevdlPack, ImageOptionsApplyToTheFollowingFile) {
  const std::string dir = scratchDir();
  const std::string out = dir + "/props.devdl";
  CommandResult pack = run({DEVDL_PACK, "-o", out, "--module-id", "libseed", "--depends", "liba,libb",
                            "--vf-set", "Base", "--dummy-image", "--aspects", "fp64,2",
                            "--property", "vendor/x:tag=str:hello", image("lib.spv"), "--calls-vf",
                            "Base", "--creates-vf", "Base", image("app.spv")});
  ASSERT_EQ(pack.status, 0) << pack.err;
  CommandResult nm = run({DEVDL_NM, "--properties", out});
  ASSERT_EQ(nm.status, 0) << nm.err;
  const std::string lib = nm.out.substr(0, nm.out.find("(image 1"));
  const std::string app = nm.out.substr(nm.out.find("(image 1"));
  for (const char *expected : {"[devdl/module]\n  id = \"libseed\"\n  depends = \"liba,libb\"\n",
                               "  virtual-functions-set = \"Base\"\n", "  dummy-image = 1\n",
                               "[SYCL/device requirements]\n  aspects = 0x0600000002000000 (fp64, gpu)\n",
                               "[vendor/x]\n  tag = \"hello\"\n",
                               "[SYCL/exported symbols]\n  LibCounter = 1\n"})
    EXPECT_NE(lib.find(expected), std::string::npos) << expected << "\n" << lib;
  EXPECT_NE(app.find("  calls-virtual-functions-set = \"Base\"\n  creates-virtual-functions-set = \"Base\"\n"),
            std::string::npos)
      << app;
  EXPECT_EQ(app.find("libseed"), std::string::npos) << "options must not leak to the next file";
}

TEST(DevdlPack, BadOptionsAreRefused) {
  const std::string dir = scratchDir();
  struct Case {
    std::vector<std::string> args;
    const char *message;
  } cases[] = {
      {{"--frobnicate", image("lib.spv")}, "unknown option --frobnicate"},
      {{"-o", dir + "/x", image("lib.spv"), "--module-id", "m"}, "apply to nothing"},
      {{"--property", "broken", image("lib.spv")}, "expected SET:NAME=TYPE:VALUE"},
      {{"--property", "s:n=u32:lots", image("lib.spv")}, "bad u32 value"},
      {{"--property", "s:n=bytes:abc", image("lib.spv")}, "bad hex value"},
      {{"--aspects", "fp64,warp", image("lib.spv")}, "`warp` is neither an aspect's name nor a number"},
      {{"--object", image("lib.spv")}, "-o FILE is required"},
      {{"-o", dir + "/x", "/nonexistent.spv"}, "/nonexistent.spv: No such file or directory"},
      {{}, "no input files"},
  };
  for (const Case &c : cases) {
    std::vector<std::string> argv{DEVDL_PACK};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    CommandResult r = run(argv);
    EXPECT_EQ(r.status, 1) << c.message;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/x")) << "a failed pack writes nothing";
}

TEST(DevdlPack, NativeOpenClBinariesTakeTheSymbolsOfTheirSource) {
  // Any bytes stand for the driver's binary here: devdl-pack does not read it.
  const std::string dir = scratchDir();
  writeFile(dir + "/app.clobj", "a driver's binary");
  CommandResult pack = run({DEVDL_PACK, "-o", dir + "/native.devdl", "--opencl-binary-of", image("app.spv"),
                            dir + "/app.clobj"});
  ASSERT_EQ(pack.status, 0) << pack.err;
  CommandResult nm = run({DEVDL_NM, dir + "/native.devdl"});
  EXPECT_EQ(nm.out, "K AppKernel\nU LibDeviceFunc\n") << nm.err;
  CommandResult json = run({DEVDL_NM, "--json", dir + "/native.devdl"});
  EXPECT_NE(json.out.find("\"format\": \"opencl-binary\""), std::string::npos) << json.out;
  // The source must be one SPIR-V or SPIR image; the binary itself cannot be read without it.
  CommandResult two = run({DEVDL_PACK, "-o", dir + "/x.devdl", "--opencl-binary-of", dir + "/native.devdl",
                           dir + "/app.clobj"});
  EXPECT_EQ(two.status, 1);
  EXPECT_EQ(two.err, "devdl-pack: " + dir + "/native.devdl: --opencl-binary-of needs one SPIR-V or SPIR image, "
                     "the binary's source\n");
  CommandResult dangling = run({DEVDL_PACK, "-o", dir + "/x.devdl", image("app.spv"), "--opencl-binary-of",
                                image("app.spv")});
  EXPECT_EQ(dangling.status, 1);
  EXPECT_NE(dangling.err.find("image options after the last input file apply to nothing"), std::string::npos);
}

TEST(DevdlPack, CheckNamesTheUnresolvedSymbolWhenTheLibraryIsLeftOut) {
  CommandResult ok = run({DEVDL_PACK, "--check", image("app.spv"), image("lib.spv")});
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(ok.out, "devdl-pack: 2 images in 2 files: all 1 imports resolved\n");

  CommandResult missing = run({DEVDL_PACK, "--check", image("app.spv")});
  EXPECT_EQ(missing.status, 1);
  EXPECT_EQ(missing.err, "devdl-pack: " + image("app.spv") +
                             ": image 0 (spirv): undefined device symbol `LibDeviceFunc`\n");

  CommandResult dup = run({DEVDL_PACK, "--check", image("app.spv"), image("lib.spv"), image("lib.spv")});
  EXPECT_EQ(dup.status, 0);
  EXPECT_NE(dup.err.find("warning: " + image("lib.spv") + ": image 0 (spirv): duplicate definition of "
                         "`LibDeviceFunc` (the one in " + image("lib.spv") + ": image 0 (spirv) is used)"),
            std::string::npos)
      << dup.err;
  // The SPIR bitcode app is not satisfied by a SPIR-V library? Both are SPIR: they link.
  CommandResult bc = run({DEVDL_PACK, "--check", image("app.bc"), image("lib.spv")});
  EXPECT_EQ(bc.status, 0) << bc.err;
}

// Needed files (--needed, --runpath), as DT_NEEDED and DT_RUNPATH: devdl-nm lists them, --check
// finds them as the loader does and resolves over them, and names one not found with its needer.
TEST(DevdlPack, NeededFilesAndARunPath) {
  const std::string dir = scratchDir(), app = dir + "/pkg/app.devdl", lib = dir + "/pkg/deps/lib.devdl";
  std::filesystem::create_directories(dir + "/pkg/deps");
  CommandResult packed = run({DEVDL_PACK, "-o", lib, image("lib.spv")});
  ASSERT_EQ(packed.status, 0) << packed.err;
  packed = run({DEVDL_PACK, "-o", app, "--needed", "lib.devdl", "--runpath", "$ORIGIN/deps:/opt/x", image("app.spv")});
  ASSERT_EQ(packed.status, 0) << packed.err;
  CommandResult nm = run({DEVDL_NM, app});
  EXPECT_EQ(nm.out, "NEEDED lib.devdl\nRUNPATH $ORIGIN/deps:/opt/x\nK AppKernel\nU LibDeviceFunc\n");
  CommandResult json = run({DEVDL_NM, "--json", app});
  EXPECT_NE(json.out.find("\"needed\": [\n          \"lib.devdl\"\n        ],\n        \"runpath\": \"$ORIGIN/deps:/opt/x\""),
            std::string::npos)
      << json.out;

  CommandResult check = run({DEVDL_PACK, "--check", app});
  EXPECT_EQ(check.status, 0) << check.err;
  EXPECT_EQ(check.err, "devdl-pack: note: " + app + " needs lib.devdl: " + dir + "/pkg/deps/lib.devdl\n");
  EXPECT_EQ(check.out, "devdl-pack: 2 images in 2 files: all 1 imports resolved\n");
  std::filesystem::remove(lib);
  CommandResult missing = run({DEVDL_PACK, "--check", app});
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("devdl-pack: " + app + " needs lib.devdl: not found in $ORIGIN/deps (" + dir +
                             "/pkg/deps), /opt/x, "),
            std::string::npos)
      << missing.err;

  CommandResult slash = run({DEVDL_PACK, "-o", app, "--needed", "deps/lib.devdl", image("app.spv")});
  EXPECT_EQ(slash.status, 1);
  EXPECT_NE(slash.err.find("--needed deps/lib.devdl: a file name without a slash (--runpath says where it is)"),
            std::string::npos);
  CommandResult relative = run({DEVDL_PACK, "-o", app, "--runpath", "deps", image("app.spv")});
  EXPECT_EQ(relative.status, 1);
  EXPECT_NE(relative.err.find("--runpath deps: a directory is absolute or starts with $ORIGIN"), std::string::npos);
}

// Virtual-function sets (seed 003): --check reports a set that images call and no image holds,
// and takes a set's images defining the same names (its dummy) as meant.
TEST(DevdlPack, CheckKnowsVirtualFunctionSets) {
  auto bundle = [](const char *name) { return image(std::string(name) + ".spv.devdl"); };
  CommandResult alone = run({DEVDL_PACK, "--check", bundle("vf-user"), bundle("vf-maker")});
  EXPECT_EQ(alone.status, 1);
  EXPECT_NE(alone.err.find(bundle("vf-user") + ": image 0 (spirv): calls virtual functions set A, which no image holds"),
            std::string::npos)
      << alone.err;
  EXPECT_NE(alone.err.find("warning: " + bundle("vf-maker") +
                           ": image 0 (spirv): creates objects of virtual functions set B, which no image holds"),
            std::string::npos)
      << alone.err;
  CommandResult whole = run({DEVDL_PACK, "--check", bundle("vf-a1"), bundle("vf-a2"), bundle("vf-user"),
                             bundle("vf-b-gpu"), bundle("vf-maker")});
  EXPECT_EQ(whole.status, 0) << whole.err;
  EXPECT_EQ(whole.err, "") << "a set's dummy is no duplicate definition";
}

TEST(DevdlPack, CheckOverHostLibraries) {
  CommandResult ok = run({DEVDL_PACK, "--check", DEVDL_TEST_PLUGIN, DEVDL_TEST_LINKED});
  EXPECT_EQ(ok.status, 0) << ok.err;
  CommandResult missing = run({DEVDL_PACK, "--check", DEVDL_TEST_PLUGIN});
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find(std::string(DEVDL_TEST_PLUGIN) + ": image 0 (spirv): undefined device symbol `LibDeviceFunc`"),
            std::string::npos)
      << missing.err;
}

TEST(DevdlPack, CheckCudaImages) {
  DEVDL_REQUIRE_CUDA_IMAGES();
  CommandResult ok = run({DEVDL_PACK, "--check", image("app.cubin"), image("lib.cubin")});
  EXPECT_EQ(ok.status, 0) << ok.err;
  // A SPIR-V library does not satisfy a cubin's import.
  CommandResult mixed = run({DEVDL_PACK, "--check", image("app.ptx"), image("lib.spv")});
  EXPECT_EQ(mixed.status, 1);
  EXPECT_NE(mixed.err.find("app.ptx: image 0 (ptx sm_90): undefined device symbol `LibDeviceFunc`"),
            std::string::npos)
      << mixed.err;
}

TEST(DevdlPack, CheckAnswersForAnArchitecture) {
  DEVDL_REQUIRE_CUDA_IMAGES();
  // As the loader on an sm_90 GPU: an sm_80 cubin does not run there, so its definitions are
  // no candidates; its fatbin has sm_80 PTX, which the driver compiles for sm_90.
  CommandResult old = run({DEVDL_PACK, "--check", "--arch", "sm_90", image("app.cubin"), image("lib_sm80.cubin")});
  EXPECT_EQ(old.status, 1);
  EXPECT_EQ(old.err, "devdl-pack: note: " + image("lib_sm80.cubin") + ": image 0 (cubin sm_80): left out: cubin for "
                         "sm_80 does not run on sm_90\ndevdl-pack: " + image("app.cubin") +
                         ": image 0 (cubin sm_90): undefined device symbol `LibDeviceFunc`\n");
  CommandResult fatbin = run({DEVDL_PACK, "--check", "--arch", "sm_90", image("app.cubin"), image("lib_sm80.fatbin")});
  EXPECT_EQ(fatbin.status, 0) << fatbin.err;
  CommandResult any = run({DEVDL_PACK, "--check", image("app.cubin"), image("lib_sm80.cubin")});
  EXPECT_EQ(any.status, 0) << "without a target, any GPU: " << any.err;
  CommandResult bad = run({DEVDL_PACK, "--check", "--arch", "volta", image("app.cubin")});
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("--arch volta: expected a CUDA architecture such as sm_90"), std::string::npos) << bad.err;
}

TEST(DevdlPack, CheckAnswersForTheDevicesDevdlWouldUse) {
  // PoCL here takes SPIR-V but not SPIR bitcode: lib.bc satisfies nothing on it.
  CommandResult here = run({DEVDL_PACK, "--check", "--device", image("app.spv"), image("lib.bc")});
  if (here.err.find("no OpenCL") != std::string::npos) GTEST_SKIP() << "no OpenCL device here: " << here.err;
  EXPECT_EQ(here.status, 1);
  EXPECT_NE(here.err.find(image("lib.bc") + ": image 0 (spir-bc): left out: OpenCL device "), std::string::npos)
      << here.err;
  EXPECT_NE(here.err.find(image("app.spv") + ": image 0 (spirv): undefined device symbol `LibDeviceFunc`"),
            std::string::npos)
      << here.err;
  CommandResult ok = run({DEVDL_PACK, "--check", "--device", image("app.spv"), image("lib.spv")});
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(ok.out, "devdl-pack: 2 images in 2 files: all 1 imports resolved\n");
}

TEST(DevdlPack, AddToAnExistingElfFile) {
  const std::string dir = scratchDir();
  const std::string out = dir + "/plain-with-bundle.so";
  CommandResult pack = run({DEVDL_PACK, "--add-to", DEVDL_TEST_PLAIN, "-o", out, image("lib.spv")});
  ASSERT_EQ(pack.status, 0) << pack.err;
  CommandResult nm = run({DEVDL_NM, out});
  EXPECT_EQ(nm.status, 0) << nm.err;
  EXPECT_EQ(nm.out, "D LibCounter\nT LibDeviceFunc\nT _Z8LibScalei\n");
}

TEST(DevdlPack, LlvmObjdumpListsThePackedImages) {
  if (std::string(DEVDL_LLVM_OBJDUMP).empty()) GTEST_SKIP() << "llvm-objdump-15 not found at build time";
  CommandResult r = run({DEVDL_LLVM_OBJDUMP, "--offloading", DEVDL_TEST_LINKED});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("spir64-unknown-unknown"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace devdl::test
