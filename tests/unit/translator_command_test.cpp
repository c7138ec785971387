// The machine's llvm-spirv-15 as the reader of SPIR-V where the build has no translator of its own
// (backend/spirv/translator_command.h): the module specialized before it reads it, its LLVM IR
// read back, and a command that fails, hangs or writes garbage an error saying so. The misbehaving
// commands are shell scripts.
#include "backend/spirv/translator_command.h"
#include "test_support.h"

#include <llvm/Support/Program.h>
#include <spirv/unified1/spirv.h>

#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace devdl::test {
namespace {

uint32_t op(SpvOp opcode, uint32_t words) { return words << 16 | opcode; }

TEST(TranslatorCommand, SpecializationConstantsTakeTheirValuesAsDefaults) {
  const std::vector<uint32_t> module = {
      SpvMagicNumber, 0x00010000, 0, 10, 0,
      op(SpvOpDecorate, 4), 2, SpvDecorationSpecId, 7,
      op(SpvOpDecorate, 4), 4, SpvDecorationSpecId, 8,
      op(SpvOpDecorate, 4), 6, SpvDecorationSpecId, 9,
      op(SpvOpTypeInt, 4), 1, 32, 0,
      op(SpvOpSpecConstant, 4), 1, 2, 5,
      op(SpvOpTypeBool, 2), 3,
      op(SpvOpSpecConstantTrue, 3), 3, 4,
      op(SpvOpTypeInt, 4), 5, 64, 0,
      op(SpvOpSpecConstant, 5), 5, 6, 1, 0,
      op(SpvOpSpecConstant, 4), 1, 7, 11,  // no SpecId: left as it is
  };
  const backend::SpecConstant values[] = {{7, 42}, {8, 0}, {9, 0x123456789ull}};
  std::vector<uint32_t> expected = module;
  expected[24] = 42;
  expected[27] = op(SpvOpSpecConstantFalse, 3);
  expected[37] = 0x23456789;
  expected[38] = 0x1;
  EXPECT_EQ(backend::withSpecConstantDefaults(module, values), expected);
  EXPECT_EQ(backend::withSpecConstantDefaults(module, {}), module);
}

class TranslatorCommandRun : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string bytes = readFile(image("lib.spv"));
    words_.resize(bytes.size() / 4);
    std::memcpy(words_.data(), bytes.data(), words_.size() * 4);
  }
  void TearDown() override { unsetenv("DEVDL_TRANSLATOR_TIMEOUT"); }

  // A command that runs `script` (sh) with the translator's arguments.
  std::string command(const std::string &script) {
    const std::string path = scratchDir() + "/llvm-spirv-" + std::to_string(++commands_);
    writeFile(path, "#!/bin/sh\n" + script + "\n");
    EXPECT_EQ(chmod(path.c_str(), 0755), 0);
    return path;
  }

  llvm::Expected<std::unique_ptr<llvm::Module>> read(const std::string &command) {
    return backend::readByCommand(command, context_, words_, {});
  }

  llvm::LLVMContext context_;
  std::vector<uint32_t> words_;  // lib.spv
  int commands_ = 0;
};

TEST_F(TranslatorCommandRun, Debians_llvm_spirv_15ReadsTheModuleIntoLlvmIr) {
  auto found = llvm::sys::findProgramByName("llvm-spirv-15");
  if (!found) GTEST_SKIP() << "no llvm-spirv-15 on PATH (Debian: llvm-spirv-15, scripts/setup-debian.sh)";
  auto module = read(*found);
  ASSERT_TRUE(!!module) << errorText(module);
  bool defined = false;
  for (const llvm::Function &function : **module)
    defined |= !function.isDeclaration() && function.getName().contains("LibDeviceFunc");
  EXPECT_TRUE(defined);
}

TEST_F(TranslatorCommandRun, ACommandThatFailsIsAnErrorSayingHowAndWhatItSaid) {
  const std::string failing = command("echo 'input is not SPIR-V' >&2; exit 3");
  EXPECT_EQ(errorText(read(failing)),
            "the SPIR-V translator " + failing + " exited with status 3; it said: input is not SPIR-V");
  const std::string silent = command("exit 4");
  EXPECT_EQ(errorText(read(silent)), "the SPIR-V translator " + silent + " exited with status 4");
  const std::string crashing = command("echo 'translating, and then...' >&2; kill -SEGV $$");
  EXPECT_EQ(errorText(read(crashing)), "the SPIR-V translator " + crashing +
                                           " was killed by signal 11 (Segmentation fault); it said: translating, and then...");
}

TEST_F(TranslatorCommandRun, ACommandThatHangsIsKilledAtTheBoundWithWhatItStarted) {
  setenv("DEVDL_TRANSLATOR_TIMEOUT", "1", 1);
  const std::string hanging = command("sleep 60 & wait");  // its child too, in its process group
  EXPECT_EQ(errorText(read(hanging)), "the SPIR-V translator " + hanging + " did not finish within 1 s and was killed");
}

TEST_F(TranslatorCommandRun, ACommandThatWritesGarbageIsNotReadAsAModule) {
  // Its arguments: -r --spirv-target-env=CL1.2 --spirv-ext=+all INPUT -o -, the answer on its
  // standard output.
  const std::string garbage = command("[ \"$6\" = - ] && echo 'not bitcode'");
  const std::string error = errorText(read(garbage));
  EXPECT_EQ(error.rfind(garbage + " wrote what LLVM ", 0), 0u) << error;
  EXPECT_NE(error.find("cannot read"), std::string::npos) << error;
}

// A command that writes without end is killed once it wrote more than an answer can be (64 MiB
// for a small module), not read whole: the process holds no more than that.
TEST_F(TranslatorCommandRun, ACommandThatWritesWithoutEndIsKilledAtWhatAnAnswerCanBe) {
  const std::string endless = command("exec cat /dev/zero");
  const std::string error = errorText(read(endless));
  EXPECT_EQ(error, "the SPIR-V translator " + endless + " wrote more than " + std::to_string(64 << 20) +
                       " bytes, more than its answer can be, and was killed")
      << error;
}

}  // namespace
}  // namespace devdl::test
