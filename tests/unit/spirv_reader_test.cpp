// SPIR-V images compiled from OpenCL C by clang-15 + llvm-spirv-15: exports, imports, kernels,
// spec constants, and refusal of invalid modules.
#include "backend/spirv/program_part.h"
#include "backend/spirv/words.h"
#include "image/code_graph.h"
#include "image/read_image.h"
#include "image/readers.h"
#include "support/spirv_tools.h"
#include "test_support.h"

#include <algorithm>
#include <tuple>

#include <spirv-tools/libspirv.h>
#include <spirv/unified1/spirv.h>

#include <cstring>

namespace devdl::test {
namespace {

DeviceImage readOne(const std::string &path) {
  auto file = readImageFile(path);
  EXPECT_TRUE(!!file) << errorText(file);
  if (!file || file->images.size() != 1) {
    ADD_FAILURE() << path << ": expected one image";
    return {};
  }
  return std::move(file->images[0]);
}

// SPIR-V assembly `text` as the module's words (SPIRV-Tools' assembler).
std::vector<uint32_t> assembled(const std::string &text) {
  spirv::Context context;
  spv_binary binary = nullptr;
  EXPECT_EQ(spvTextToBinary(context.get(), text.data(), text.size(), &binary, nullptr), SPV_SUCCESS);
  if (!binary) return {};
  std::vector<uint32_t> words(binary->code, binary->code + binary->wordCount);
  spvBinaryDestroy(binary);
  return words;
}

TEST(SpirvReader, LibraryExportsFunctionsAndVariables) {
  DeviceImage lib = readOne(image("lib.spv"));
  EXPECT_EQ(lib.format, ImageFormat::SpirV);
  EXPECT_EQ(lib.triple, "spir64-unknown-unknown");
  EXPECT_EQ(symbolLines(lib),
            (std::vector<std::string>{"D LibCounter", "T LibDeviceFunc", "T _Z8LibScalei"}));
}

// A module in the other byte order is valid SPIR-V (its magic number tells which): read, with the
// same symbols, and its image is the module in this host's byte order, what linkers and drivers
// then take.
TEST(SpirvReader, AModuleOfTheOtherByteOrderIsReadAsThisHostsOwn) {
  const std::string little = readFile(image("lib.spv"));
  std::string big = little;
  for (size_t at = 0; at + 4 <= big.size(); at += 4) std::reverse(big.begin() + at, big.begin() + at + 4);
  auto file = readImageMemory(asBytes(big), "big.spv", nullptr);
  ASSERT_TRUE(!!file) << errorText(file);
  ASSERT_EQ(file->images.size(), 1u);
  const DeviceImage &image = file->images[0];
  EXPECT_EQ(image.format, ImageFormat::SpirV);
  EXPECT_EQ(symbolLines(image), (std::vector<std::string>{"D LibCounter", "T LibDeviceFunc", "T _Z8LibScalei"}));
  EXPECT_EQ(asText(image.bytes), little);
}

// How many OpLoopMerge instructions a module holds.
size_t loopMerges(std::string_view module) {
  size_t count = 0;
  std::span<const uint32_t> words(reinterpret_cast<const uint32_t *>(module.data()), module.size() / 4);
  backend::walkInstructions(words, [&](size_t at, size_t) {
    count += (words[at] & 0xffff) == SpvOpLoopMerge;
    return true;
  });
  return count;
}

// loop_lib.spv and loop_nested_lib.spv as clang-15 -O1 and llvm-spirv-15 write them: the validator
// refuses each (a loop's exit block before the block that dominates it; two loops of one merge
// block). Read, each is the same module laid out as SPIR-V asks: valid, its symbols listed and
// nothing said unvouched; the first with its blocks moved and nothing else, the second without
// its merge instructions.
TEST(SpirvReader, AModuleValidButForItsBlocksLayoutIsReadLaidOutAgain) {
  spirv::Context context;
  for (const auto &[name, symbol, merges] : {std::tuple<std::string, std::string, bool>{"loop_lib", "T LoopClearOdd", true},
                                             {"loop_nested_lib", "T LoopFind", false}}) {
    SCOPED_TRACE(name);
    const std::string written = readFile(image(name + ".spv"));
    spv_const_binary_t binary{reinterpret_cast<const uint32_t *>(written.data()), written.size() / 4};
    spirv::Diagnostic diagnostic;
    ASSERT_NE(spvValidate(context.get(), &binary, diagnostic.out()), SPV_SUCCESS) << "the toolchain's defect is gone";

    const DeviceImage lib = readOne(image(name + ".spv"));
    EXPECT_EQ(lib.unvalidated, "");
    EXPECT_EQ(symbolLines(lib), (std::vector<std::string>{symbol}));
    const std::string laidOut(asText(lib.bytes));
    EXPECT_NE(laidOut, written);
    spv_const_binary_t laidOutBinary{reinterpret_cast<const uint32_t *>(laidOut.data()), laidOut.size() / 4};
    EXPECT_EQ(spvValidate(context.get(), &laidOutBinary, nullptr), SPV_SUCCESS);
    ASSERT_GT(loopMerges(written), 0u);
    if (merges) {
      std::vector<uint32_t> before(binary.code, binary.code + binary.wordCount),
          after(laidOutBinary.code, laidOutBinary.code + laidOutBinary.wordCount);
      std::sort(before.begin(), before.end());
      std::sort(after.begin(), after.end());
      EXPECT_EQ(before, after) << "blocks moved, nothing else";
    } else {
      EXPECT_EQ(loopMerges(laidOut), 0u);
    }
  }
}

// An image a bundle's recorded symbols let through unread is checked at its link, and the link
// takes it as the reader leaves it: laid out (here), in this host's byte order (a big-endian one).
TEST(SpirvReader, AnImageCheckedAtItsLinkIsTakenAsTheReaderLeavesIt) {
  const std::string written = readFile(image("loop_lib.spv"));
  std::string big = written;
  for (size_t at = 0; at + 4 <= big.size(); at += 4) std::reverse(big.begin() + at, big.begin() + at + 4);
  const std::string ordered(asText(readOne(image("loop_lib.spv")).bytes));
  for (const std::string *bytes : {&written, static_cast<const std::string *>(&big)}) {
    DeviceImage unchecked;
    unchecked.format = ImageFormat::SpirV;
    unchecked.bytes = asBytes(*bytes);
    auto checked = checkImage(unchecked);
    ASSERT_TRUE(!!checked) << errorText(checked);
    ASSERT_TRUE(checked->has_value());
    EXPECT_EQ(asText((*checked)->bytes), ordered);
    EXPECT_EQ((*checked)->unvalidated, "");
    unchecked.checked = true;
    auto again = checkImage(unchecked);
    ASSERT_TRUE(!!again) << errorText(again);
    EXPECT_FALSE(again->has_value()) << "checked already: taken as it is";
  }
}

TEST(SpirvReader, AppKernelImportsTheLibraryFunctionAndNoBuiltin) {
  DeviceImage app = readOne(image("app.spv"));
  // llvm-spirv also exports the kernel's body as a function of the same name: listed once, as K.
  EXPECT_EQ(symbolLines(app), (std::vector<std::string>{"K AppKernel", "U LibDeviceFunc"}));
  const std::string bytes = readFile(image("app.spv"));
  ASSERT_NE(bytes.find("__spirv_BuiltInGlobalInvocationId"), std::string::npos)
      << "the image should import the builtin the filter removes";
}

// SYCL's device-library names are reserved, so no imports by the seed's filter, but weak ones: bound
// where a library defines them (SYCL's fallback libraries), else left to the driver.
TEST(SpirvReader, DeviceLibraryNamesAreWeakImports) {
  DeviceImage app = readOne(image("devicelib_app.spv"));
  EXPECT_EQ(symbolLines(app), (std::vector<std::string>{"K DevicelibKernel", "w __devicelib_expf",
                                                        "w __devicelib_hypotf", "w __devicelib_sinf"}));
  // Kept as such through a bundle, and out of the seed's imported-symbols set (DPC++ links its
  // device libraries apart).
  const std::string packed = packImages({app});
  auto read = readImageMemory(Bytes(reinterpret_cast<const uint8_t *>(packed.data()), packed.size()), "packed", nullptr);
  ASSERT_TRUE(!!read) << errorText(read);
  ASSERT_EQ(read->images.size(), 1u);
  EXPECT_EQ(symbolLines(read->images[0]), symbolLines(app));
  for (const PropertySet &set : symbolPropertySets(app)) {
    if (set.name == kImportedSymbolsSet) {
      EXPECT_TRUE(set.properties.empty());
    }
  }
}

TEST(SpirvReader, SpecIdsBecomeSpecConstantProperties) {
  DeviceImage spec = readOne(image("spec_constants.spv"));
  EXPECT_EQ(symbolLines(spec), (std::vector<std::string>{"K ScaleKernel", "T SpecHelper"}));
  const PropertySet *set = spec.findSet(kSpecConstantsSet);
  ASSERT_NE(set, nullptr);
  ASSERT_EQ(set->properties.size(), 2u);
  const Property *three = set->find("SpecId 3"), *seven = set->find("SpecId 7");
  ASSERT_TRUE(three && seven);
  EXPECT_EQ(three->u32, 3u);
  EXPECT_EQ(seven->u32, 7u);
}

TEST(SpirvReader, ImageBytesAreAViewOfTheMappedFile) {
  auto file = readImageFile(image("lib.spv"));
  ASSERT_TRUE(!!file) << errorText(file);
  const DeviceImage &lib = file->images[0];
  const Bytes whole = lib.storage->bytes();
  EXPECT_EQ(lib.bytes.data(), whole.data());
  EXPECT_EQ(lib.bytes.size(), whole.size());
}

TEST(SpirvReader, InvalidModuleIsRefusedNamingFileAndProblem) {
  std::string bytes = readFile(image("app.spv"));
  // Point the first OpFunctionCall at an id that does not exist: structurally parseable,
  // semantically invalid.
  const uint32_t opFunctionCall = (5u << 16) | 57u;
  bool patched = false;
  for (size_t i = 20; i + 20 <= bytes.size(); i += 4) {
    uint32_t word;
    std::memcpy(&word, bytes.data() + i, 4);
    if (word == opFunctionCall) {
      const uint32_t bogus = 0x3fffff;
      std::memcpy(bytes.data() + i + 12, &bogus, 4);
      patched = true;
      break;
    }
  }
  ASSERT_TRUE(patched);
  auto file = readImageMemory(asBytes(bytes), "broken.spv", nullptr);
  ASSERT_FALSE(!!file);
  const std::string message = errorText(file);
  EXPECT_NE(message.find("broken.spv: image 0 (spirv): invalid SPIR-V"), std::string::npos) << message;
}

// An export on an id that is no function or variable of the module (a constant: the validator lets
// it through) would list a symbol of nothing: refused, naming it.
TEST(SpirvReader, AnExportOfNothingTheModuleDefinesIsRefused) {
  const std::string text = "OpCapability Addresses\nOpCapability Linkage\nOpCapability Kernel\n"
                           "OpMemoryModel Physical64 OpenCL\n"
                           "OpDecorate %ghost LinkageAttributes \"Ghost\" Export\n"
                           "%int = OpTypeInt 32 0\n%ghost = OpConstant %int 7\n"
                           "%void = OpTypeVoid\n%fn = OpTypeFunction %void\n"
                           "%f = OpFunction %void None %fn\n%l = OpLabel\nOpReturn\nOpFunctionEnd\n";
  const std::vector<uint32_t> words = assembled(text);
  const std::string bytes(reinterpret_cast<const char *>(words.data()), words.size() * 4);
  const std::string error = errorText(readImageMemory(asBytes(bytes), "ghost.spv", nullptr));
  EXPECT_NE(error.find("ghost.spv: image 0 (spirv): invalid SPIR-V: `Ghost` is exported (LinkageAttributes) on id"),
            std::string::npos)
      << error;
}

// A module of a capability newer than Debian's SPIRV-Tools (bfloat16 conversion, 6115: a number
// its grammar does not know), with the extension that brings it: read by devdl's own reader, its
// symbols listed, and marked as one the validator could not vouch for. The same capability in a
// module that declares no extension is refused, as is one whose words do not fit.
TEST(SpirvReader, AModuleOfAnExtensionNewerThanTheValidatorIsReadUnvouched) {
  auto newCapability = [](bool extension) {
    const std::string text = std::string("OpCapability Addresses\nOpCapability Linkage\nOpCapability Kernel\n"
                                         "OpCapability Int8\n") +
                             (extension ? "OpExtension \"SPV_INTEL_bfloat16_conversion\"\n" : "") +
                             "OpMemoryModel Physical64 OpenCL\n"
                             "OpDecorate %f LinkageAttributes \"ConvertIt\" Export\n"
                             "%void = OpTypeVoid\n%fn = OpTypeFunction %void\n"
                             "%f = OpFunction %void None %fn\n%l = OpLabel\nOpReturn\nOpFunctionEnd\n";
    std::vector<uint32_t> words = assembled(text);
    for (size_t i = 5; i + 1 < words.size(); ++i)
      if (words[i] == (2u << 16 | 17u) && words[i + 1] == 39u) words[i + 1] = 6115;  // Int8 made the new one
    return std::string(reinterpret_cast<const char *>(words.data()), words.size() * 4);
  };
  const std::string bytes = newCapability(true);
  auto file = readImageMemory(asBytes(bytes), "bf16.spv", nullptr);
  ASSERT_TRUE(!!file) << errorText(file);
  EXPECT_EQ(symbolLines(file->images[0]), (std::vector<std::string>{"T ConvertIt"}));
  EXPECT_EQ(file->images[0].unvalidated.rfind("Invalid capability operand: 6115", 0), 0u) << file->images[0].unvalidated;
  EXPECT_EQ(errorText(readImageMemory(asBytes(newCapability(false)), "bare.spv", nullptr))
                .rfind("bare.spv: image 0 (spirv): invalid SPIR-V: Invalid capability operand: 6115", 0),
            0u);
  std::string cut = bytes;
  cut[5 * 4 + 2] = '\x7f';  // the first instruction's word count past the module's end
  EXPECT_NE(errorText(readImageMemory(asBytes(cut), "cut.spv", nullptr)).find("an instruction past the module's end"),
            std::string::npos);
}

TEST(SpirvReader, TruncatedModulesFailCleanly) {
  const std::string bytes = readFile(image("lib.spv"));
  auto whole = readImageMemory(asBytes(bytes), "lib.spv", nullptr);
  ASSERT_TRUE(!!whole) << errorText(whole);
  for (size_t size = 1; size < bytes.size(); ++size) {
    auto file = readImageMemory(asBytes(std::string_view(bytes).substr(0, size)), "cut.spv", nullptr);
    if (file) {
      // A cut at an instruction boundary before the functions can leave a valid module: it
      // must then list no more than the whole one.
      EXPECT_EQ(size % 4, 0u) << "size " << size;
      for (const std::string &line : symbolLines(file->images[0]))
        EXPECT_TRUE(contains(symbolLines(whole->images[0]), line)) << "size " << size << ": " << line;
      continue;
    }
    EXPECT_NE(errorText(file).find("cut.spv"), std::string::npos);
  }
}

// What a link in parts reads (issue 41): each kernel, the variable, and which kernels use it; the
// built-in a kernel reads is no variable of the program's.
TEST(SpirvCodeGraph, KernelsVariablesAndWhatTheyUse) {
  const DeviceImage lib = readOne(image("parts.spv"));
  auto graph = readers::spirvCodeGraph(lib.bytes);
  ASSERT_TRUE(!!graph) << errorText(graph);
  auto find = [&](std::string_view name, SymbolKind kind) -> const CodeGraph::Definition * {
    for (const CodeGraph::Definition &d : graph->definitions)
      if (d.name == name && d.kind == kind) return &d;
    return nullptr;
  };
  for (const char *kernel : {"BumpShared", "ReadShared", "Square", "Negate", "NegateTwice"})
    EXPECT_NE(find(kernel, SymbolKind::Kernel), nullptr) << kernel;
  ASSERT_NE(find("Shared", SymbolKind::Variable), nullptr);
  size_t variables = 0;
  for (const CodeGraph::Definition &d : graph->definitions) variables += d.kind == SymbolKind::Variable;
  EXPECT_EQ(variables, 1u) << "the built-in global id is the driver's, not a variable of the program";
  // llvm-spirv's entry point calls the kernel's exported body, which uses the variable.
  auto reaches = [&](const char *kernel, const char *name) {
    for (const CodeGraph::Definition &d : graph->definitions)
      if (d.name == kernel &&
          (llvm::is_contained(d.refers, std::string(name)) || llvm::is_contained(d.calls, std::string(name))))
        return true;
    return false;
  };
  EXPECT_TRUE(reaches("BumpShared", "Shared"));
  EXPECT_TRUE(reaches("ReadShared", "Shared"));
  EXPECT_FALSE(reaches("Square", "Shared"));
  auto refused = readers::spirvCodeGraph(Bytes(lib.bytes.data(), 22));
  EXPECT_FALSE(!!refused);
  llvm::consumeError(refused.takeError());
}

// A module cut to one part: the other parts' kernels and variables are gone, its own are there.
TEST(SpirvCodeGraph, AModuleCutToAPartHoldsItsKernelsAlone) {
  const DeviceImage lib = readOne(image("parts.spv"));
  auto graph = readers::spirvCodeGraph(lib.bytes);
  ASSERT_TRUE(!!graph) << errorText(graph);
  const std::vector<ProgramPart> parts = partitionKernels({&*graph, 1}, 4);
  ASSERT_EQ(parts.size(), 4u);
  std::vector<uint32_t> words(lib.bytes.size() / 4);
  std::memcpy(words.data(), lib.bytes.data(), words.size() * 4);
  for (size_t p = 0; p < parts.size(); ++p) {
    auto cut = backend::spirvForPart(words, parts, p, {});
    ASSERT_TRUE(!!cut) << errorText(cut);
    auto read = readImageMemory(Bytes(reinterpret_cast<const uint8_t *>(cut->data()), cut->size() * 4), "part",
                                std::make_shared<Storage>());
    ASSERT_TRUE(!!read) << errorText(read) << " (part " << p << ", validated as it is read)";
    std::vector<std::string> expected;
    for (const std::string &kernel : parts[p].kernels) expected.push_back("K " + kernel);
    for (const std::string &variable : parts[p].variables) expected.push_back("D " + variable);
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(symbolLines(read->images[0]), expected) << "part " << p;
    EXPECT_LT(cut->size(), words.size()) << "what other parts alone use is gone";
  }
  // A plan that parts two kernels of one variable (a graph that missed a use) is refused: the part
  // without the variable would have an instance of its own.
  const std::vector<ProgramPart> wrong = {{{"BumpShared", "Square", "Negate", "NegateTwice"}, {"Shared"}, 0, {}},
                                          {{"ReadShared"}, {}, 0, {}}};
  EXPECT_TRUE(!!backend::spirvForPart(words, wrong, 0, {}));
  auto refused = backend::spirvForPart(words, wrong, 1, {});
  ASSERT_FALSE(!!refused);
  EXPECT_EQ(errorText(refused), "part 1's code uses variable `Shared`, which another part holds: it would have two "
                                "instances");
}

// A program cut to what one kernel uses (partReaching): that kernel's entry point, what it reaches
// (here a variable another kernel reaches too), and none of the library's other code or exports.
TEST(SpirvCodeGraph, AModuleCutToWhatAKernelUsesHoldsThatAlone) {
  auto cutTo = [](const std::string &file, std::string_view root, bool joinVariables) {
    const DeviceImage lib = readOne(image(file));
    auto graph = readers::spirvCodeGraph(lib.bytes);
    EXPECT_TRUE(!!graph) << errorText(graph);
    const std::string_view roots[] = {root};
    const std::vector<ProgramPart> parts = partReaching({&*graph, 1}, roots, joinVariables);
    EXPECT_EQ(parts.size(), 2u);
    std::vector<uint32_t> words(lib.bytes.size() / 4);
    std::memcpy(words.data(), lib.bytes.data(), words.size() * 4);
    auto cut = backend::spirvForPart(words, parts, 0, {});
    EXPECT_TRUE(!!cut) << errorText(cut);
    auto read = readImageMemory(Bytes(reinterpret_cast<const uint8_t *>(cut->data()), cut->size() * 4), "part",
                                std::make_shared<Storage>());
    EXPECT_TRUE(!!read) << errorText(read) << " (validated as it is read)";
    return symbolLines(read->images[0]);
  };
  EXPECT_EQ(cutTo("parts.spv", "ReadShared", false), (std::vector<std::string>{"D Shared", "K ReadShared"}));
  EXPECT_EQ(cutTo("parts.spv", "ReadShared", true),
            (std::vector<std::string>{"D Shared", "K BumpShared", "K ReadShared"}));
  EXPECT_EQ(cutTo("parts.spv", "Square", false), std::vector<std::string>{"K Square"});
  EXPECT_EQ(cutTo("lib_kernels1.spv", "SmallKernel000", false), std::vector<std::string>{"K SmallKernel000"})
      << "the library's exported function, which the kernel does not call, is gone";
}

}  // namespace
}  // namespace devdl::test
