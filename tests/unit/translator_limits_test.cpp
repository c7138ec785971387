// What the SPIR-V to SPIR translator cannot take (backend/spirv/translator_limits.h): each limit
// refuses, for what it is, a module the validator accepts, and lets through what lies beside it.
// The modules are assembled from tests/data/translator-limits by spirv-as, compiled from OpenCL C
// by clang-15 and llvm-spirv-15, and the fuzzers' finds (tests/data/fuzz-regressions).
#include "backend/opencl/opencl_device.h"
#include "backend/spirv/link.h"
#include "backend/spirv/translation.h"
#include "backend/spirv/translator_limits.h"
#include "image/read_image.h"
#include "test_support.h"

#include <llvm/ADT/STLExtras.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace devdl::test {
namespace {

// Each module of tests/data/translator-limits the translator is refused, and why.
struct Refused {
  const char *name;
  const char *refusal;
};
const Refused kRefused[] = {
    {"alignment_of_a_variable", "alignment 12, not a power of 2 (opcode 71)"},
    {"alignment_of_an_access", "alignment 6, not a power of 2 (opcode 61)"},
    {"builtin_not_one_of_opencls", "builtin 1 (of %1), which is not one of OpenCL's (opcode 71)"},
    {"named_as_a_builtin_not_one_of_opencls",
     "a name `__spirv_BuiltInPointSize`, which is not one of OpenCL's builtins (opcode 5)"},
    {"builtin_variable_indexed",
     "builtin variable %1 (decorated or named so) used other than loaded, which the SPIR-V to SPIR translator does "
     "not take (opcode 66)"},
    {"unknown_extension",
     "SPIR-V extension `SPV_DEVDL_not_an_extension`, which the SPIR-V to SPIR translator does not know (opcode 10)"},
    {"logical_addressing", "addressing model 0, not OpenCL's Physical32 or Physical64 (opcode 14)"},
    {"decorate_string",
     "an OpDecorateString or OpMemberDecorateString, which the SPIR-V to SPIR translator does not read (opcode 5632)"},
    {"structure_named_as_the_translators",
     "a structure named as the SPIR-V to SPIR translator names its own types (spirv.*, opencl.*) (opcode 30)"},
    {"name_of_an_extinstimport", "a name or decoration of %1, defined before it (opcode 5)"},
    {"function_short_of_a_parameter", "a function with 0 parameters whose type has 1 (opcode 248)"},
    {"spec_constant_conversion_of_a_number", "a specialization constant's conversion 117 of %1, not a pointer (opcode 52)"},
    {"lets_through_1.5", "SPIR-V version 1.5, newer than the SPIR-V to SPIR translator reads (1.4)"},
};

class TranslatorLimits : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!backend::hasTranslatorHelper()) GTEST_SKIP() << "this build has no SPIR-V to SPIR translator of its own to check for";
  }

  // The test image made of tests/data/translator-limits/NAME.
  static std::string limitImage(const std::string &name) { return image("translator_limits_" + name + ".spv"); }

  static std::vector<uint32_t> wordsOf(const std::string &path) {
    const std::string bytes = readFile(path);
    std::vector<uint32_t> words(bytes.size() / 4);
    std::memcpy(words.data(), bytes.data(), words.size() * 4);
    return words;
  }

  // Why checkTranslatable refuses the words; "" where it lets them through.
  static std::string refusalOf(std::span<const uint32_t> words) {
    llvm::Error refused = backend::checkTranslatable(words);
    return refused ? llvm::toString(std::move(refused)) : "";
  }
  static std::string refusalOf(const std::string &name) { return refusalOf(wordsOf(limitImage(name))); }
};

TEST_F(TranslatorLimits, EachLimitRefusesItsModuleForWhatItIs) {
  for (const auto &[name, why] : kRefused) EXPECT_EQ(refusalOf(name), why) << name;
}

// A refusal is an error of its own (the driver or another path may take the module), apart from
// words that are no SPIR-V at all.
TEST_F(TranslatorLimits, ARefusalIsUnsupportedAndWordsThatDoNotParseAreBadFormat) {
  EXPECT_EQ(errorCode(backend::checkTranslatable(wordsOf(limitImage("alignment_of_a_variable")))), ErrorCode::Unsupported);
  // The module that passes, ending inside an instruction: an OpLoad of 4 words, its first alone.
  std::vector<uint32_t> cut = wordsOf(limitImage("lets_through"));
  ASSERT_EQ(refusalOf(cut), "");
  cut.push_back(4u << 16 | 61u);
  llvm::Error refused = backend::checkTranslatable(cut);
  ASSERT_TRUE(!!refused);
  EXPECT_EQ(errorCode(std::move(refused)), ErrorCode::BadFormat);
  const std::string why = refusalOf(cut);
  EXPECT_EQ(why.rfind("invalid SPIR-V: ", 0), 0u) << why;
}

// Beside each limit: a known extension, a name of a function, a structure named struct.*,
// GlobalInvocationId decorated, named and loaded as the translator writes it, alignments that are
// powers of 2, a specialization constant's IAdd, SPIR-V 1.4; and OpenCL's other addressing model.
TEST_F(TranslatorLimits, WhatLiesBesideEachLimitPasses) {
  EXPECT_EQ(refusalOf("lets_through"), "");
  EXPECT_EQ(refusalOf("physical32"), "");
}

// What the translator wrote, it reads: every SPIR-V image the test build compiles from OpenCL C (a
// NAME.spv with its SPIR, NAME.bc), OpenCL's builtins among them as llvm-spirv writes them
// (work_items.spv: every work-item function and cl_khr_subgroups').
TEST_F(TranslatorLimits, ImagesCompiledFromOpenClCPass) {
  std::vector<std::string> compiled;
  for (const auto &entry : std::filesystem::directory_iterator(std::filesystem::path(image("lib.spv")).parent_path())) {
    std::filesystem::path spir = entry.path();
    if (entry.path().extension() != ".spv" || !std::filesystem::exists(spir.replace_extension(".bc"))) continue;
    compiled.push_back(entry.path().filename().string());
    EXPECT_EQ(refusalOf(wordsOf(entry.path().string())), "") << entry.path().filename().string();
  }
  EXPECT_TRUE(llvm::is_contained(compiled, "work_items.spv"));
  EXPECT_TRUE(llvm::is_contained(compiled, "lib.spv"));
  EXPECT_GT(compiled.size(), 30u);
}

// The translation refuses first what the translator would end the process on (this test's process
// goes on), naming the module it translates, the linked one.
TEST_F(TranslatorLimits, TranslationRefusesWhatTheLimitsRefuseBeforeCallingTheTranslator) {
  for (const auto &[name, why] : kRefused) {
    const std::vector<uint32_t> words = wordsOf(limitImage(name));
    EXPECT_EQ(errorText(backend::spirvToSpir(words)), std::string("linked SPIR-V: ") + why) << name;
    EXPECT_EQ(errorText(backend::optimizeSpirv(words)), std::string("linked SPIR-V: ") + why) << name;
  }
  auto spir = backend::spirvToSpir(wordsOf(limitImage("lets_through")));
  EXPECT_TRUE(!!spir) << errorText(spir);
}

// On a device that takes SPIR (PoCL), which the translator's output goes to, each image is checked
// before the link, and a refusal names the image, as the loader labels it.
TEST_F(TranslatorLimits, ARefusalOnADeviceThatTakesSpirNamesTheImage) {
  auto device = backend::opencl::Device::openDefault();
  if (!device) GTEST_SKIP() << "no OpenCL device: " << llvm::toString(device.takeError());
  if (!(*device)->capabilities().spir || (*device)->capabilities().spirvIl)
    GTEST_SKIP() << "OpenCL device " << (*device)->name() << " does not take SPIR alone: it is given SPIR-V";
  for (const auto &[name, why] : kRefused) {
    auto read = readImageFile(limitImage(name));
    ASSERT_TRUE(!!read) << name << ": " << errorText(read);
    ASSERT_EQ(read->images.size(), 1u) << name;
    const std::string label = std::filesystem::path(limitImage(name)).filename().string() + ": " + read->images[0].label(0);
    const backend::LinkInput input{&read->images[0], label};
    auto linked = (*device)->link(std::span<const backend::LinkInput>(&input, 1), nullptr);
    EXPECT_EQ(errorText(linked), label + ": " + why) << name;
  }
}

// Each SPIR-V input that once ended the process in the SPIR-V to SPIR translator (found by
// fuzz_link): refused before translation, for what it is.
TEST_F(TranslatorLimits, EachFuzzFindIsRefusedForWhatItIs) {
  const std::filesystem::path dir = std::filesystem::path(DEVDL_TEST_DATA) / "fuzz-regressions";
  // The file, and what the translator is refused for: its images linked, as a program of them is
  // (of the bundle whose last two images define the same name, the first and the last).
  struct Find {
    const char *name;
    const char *refusal;
    std::vector<size_t> images = {};  // all
  };
  const Find finds[] = {
      {"spirv-builtin-variable-as-an-index", "builtin variable %11 (decorated or named so) used other than loaded"},
      {"spirv-function-missing-a-parameter", "a function with 0 parameters whose type has 1"},
      {"spirv-logical-addressing", "addressing model 0, not OpenCL's Physical32 or Physical64"},
      {"spirv-name-of-an-extinstimport", "a name or decoration of %1, defined before it"},
      {"spirv-spec-constant-cast-of-a-number", "a specialization constant's pointer operation on %40, not a pointer"},
      {"spirv-spec-constant-chain-past-its-type", "a specialization constant's access chain whose index %23 does not"},
      {"spirv-spec-constant-chain-indexed-by-a-pointer", "a specialization constant's access chain whose index %73 is not an integer"},
      // This find's chain too is indexed by a pointer, which is named first; the copy "-alone" has
      // an integer there, and keeps the conversion's own refusal in sight.
      {"spirv-spec-constant-conversion-of-a-pointer", "a specialization constant's access chain whose index %80 is not an integer"},
      {"spirv-spec-constant-conversion-of-a-pointer-alone", "a specialization constant's operation 113 on or to a pointer"},
      {"spirv-spec-constant-number-conversion-of-a-pointer", "a specialization constant's conversion 120 of %81, a pointer"},
      {"spirv-string-padding", "a string padded with other than zeros"},
      {"spirv-structure-named-as-the-translators", "a structure named as the SPIR-V to SPIR translator names its own"},
      {"spirv-variable-named-as-a-builtin", "builtin variable %9 (decorated or named so) used other than loaded"},
      {"spirv-decorate-string", "an OpDecorateString or OpMemberDecorateString, which the SPIR-V to SPIR"},
      {"spirv-builtin-not-one-of-opencls", "builtin 1 (of %"},
      // The find with its builtin decoration and linkage taken off, and its variable named as one.
      {"spirv-named-as-a-builtin-not-one-of-opencls", "a name `__spirv_BuiltInPointSize`, which is not one of OpenCL's"},
      {"bundle-alignment-not-a-power-of-2", "alignment 132, not a power of 2"},
      {"bundle-spirv-version-newer-than-the-translator", "SPIR-V version 1.5, newer than the SPIR-V to SPIR", {0, 2}},
  };
  for (const auto &[name, refusal, which] : finds) {
    auto file = readImageFile(dir / name);
    ASSERT_TRUE(!!file) << name << ": " << errorText(file);
    std::vector<const DeviceImage *> images;
    for (size_t i = 0; i < file->images.size(); ++i)
      if (which.empty() || llvm::is_contained(which, i)) images.push_back(&file->images[i]);
    auto words = backend::linkSpirv(images, std::vector<std::string>(images.size(), name));
    ASSERT_TRUE(!!words) << name << ": " << errorText(words);
    llvm::Error refused = backend::checkTranslatable(*words);
    EXPECT_TRUE(!!refused) << name;
    const std::string why = llvm::toString(std::move(refused));
    EXPECT_NE(why.find(refusal), std::string::npos) << name << ": " << why;
  }
}

}  // namespace
}  // namespace devdl::test
