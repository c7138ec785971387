// The software link strategy end to end on a real OpenCL device (PoCL's CPU device here): the
// seeds' example linked with SPIRV-Tools, translated to SPIR, built, and run.
#include "backend/opencl/opencl_device.h"
#include "backend/spirv/copy_kernels.h"
#include "backend/spirv/link.h"
#include "backend/spirv/place_variables.h"
#include "backend/spirv/translation.h"
#include "e2e/opencl_run.h"
#include "image/read_image.h"
#include "test_support.h"

#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace devdl::test {
namespace {

using backend::opencl::Device;

class OpenClSoftwareLink : public ::testing::Test {
 protected:
  void SetUp() override {
    auto device = Device::openDefault();
    if (!device) GTEST_SKIP() << "no OpenCL device to run on: " << llvm::toString(device.takeError());
    device_ = std::move(*device);
    if (!device_->capabilities().spir)
      GTEST_SKIP() << "OpenCL device " << device_->name() << " takes no SPIR (cl_khr_spir)";
  }

  DeviceImage read(const std::string &name) {
    auto file = readImageFile(image(name));
    EXPECT_TRUE(!!file) << errorText(file);
    if (!file) return {};
    files_.push_back(std::move(*file));
    return files_.back().images[0];
  }

  std::vector<int> run(backend::opencl::Program &program, const char *kernelName, size_t n) {
    auto kernel = program.kernel(kernelName);  // the program's own
    EXPECT_TRUE(!!kernel) << errorText(kernel);
    if (!kernel) return {};
    return runIntKernel(device_->context(), device_->id(), static_cast<cl_kernel>(*kernel), n);
  }

  // The images, read by name, linked in this order as the software link strategy links them.
  std::vector<uint32_t> link(const std::vector<std::string> &names) {
    std::vector<DeviceImage> images;
    for (const std::string &name : names) images.push_back(read(name));
    std::vector<const DeviceImage *> plan;
    std::vector<std::string> labels;
    for (size_t i = 0; i < images.size(); ++i) {
      plan.push_back(&images[i]);
      labels.push_back(names[i] + ": image 0 (spirv)");
    }
    auto linked = backend::linkSpirv(plan, labels);
    EXPECT_TRUE(!!linked) << errorText(linked);
    return linked ? *linked : std::vector<uint32_t>();
  }

  // The first literal of each OpDecorate of `decoration` in a module, sorted.
  static std::vector<uint32_t> decorated(const std::vector<uint32_t> &words, uint32_t decoration) {
    std::vector<uint32_t> values;
    for (size_t at = 5; at < words.size() && (words[at] >> 16); at += words[at] >> 16)
      if ((words[at] & 0xffff) == 71 /* OpDecorate */ && (words[at] >> 16) >= 4 && words[at + 2] == decoration)
        values.push_back(words[at + 3]);
    std::sort(values.begin(), values.end());
    return values;
  }

  std::unique_ptr<Device> device_;
  std::vector<ImageFile> files_;
};

TEST_F(OpenClSoftwareLink, ImagesWithKernelsOfTheirOwnShareTheBuiltinVariables) {
  // Both images read get_global_id: one GlobalInvocationId variable is left after the link
  // (two made the translator refuse the module and PoCL crash).
  const std::vector<uint32_t> linked = link({"kernel_app.spv", "kernel_lib.spv"});
  EXPECT_EQ(decorated(linked, 11 /* BuiltIn */), (std::vector<uint32_t>{28 /* GlobalInvocationId */}));
  auto spir = backend::spirvToSpir(linked);
  ASSERT_TRUE(!!spir) << errorText(spir);
  auto program = device_->buildSpir(*spir);
  ASSERT_TRUE(!!program) << errorText(program);
  EXPECT_EQ(run(**program, "UserKernel", 4), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(run(**program, "LibKernel", 4), (std::vector<int>{100, 102, 104, 106}));
}

TEST_F(OpenClSoftwareLink, EachImageKeepsItsOwnSpecializationConstants) {
  // Both images use SpecIds 3 and 7: the second's become 1 << 16 | 3 and 1 << 16 | 7.
  const std::vector<uint32_t> linked = link({"spec_kernel.spv", "spec_constants.spv"});
  EXPECT_EQ(decorated(linked, 1 /* SpecId */),
            (std::vector<uint32_t>{3, 7, backend::linkedSpecId(1, 3), backend::linkedSpecId(1, 7)}));
  EXPECT_EQ(backend::linkedSpecId(1, 3), 0x10003u);
}

TEST_F(OpenClSoftwareLink, SeedExampleRunsOnTheDevice) {
  DeviceImage app = read("app.spv"), lib = read("lib.spv");
  const DeviceImage *plan[] = {&app, &lib};
  const std::string labels[] = {"app.spv: image 0 (spirv)", "lib.spv: image 0 (spirv)"};
  auto linked = backend::linkSpirv(plan, labels);
  ASSERT_TRUE(!!linked) << errorText(linked);
  auto spir = backend::spirvToSpir(*linked);
  ASSERT_TRUE(!!spir) << errorText(spir);
  auto program = device_->buildSpir(*spir);
  ASSERT_TRUE(!!program) << errorText(program);

  const std::vector<int> out = run(**program, "AppKernel", 16);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[i], 2 * i) << "work-item " << i;
}

// Where devdl does not move a program's variables to host memory (a device that is no CPU), the
// host copies them through kernels of devdl's, a SPIR-V module made for the image that exports
// them and linked with it: here by the software link, on a device that takes IL by the driver's
// linker. On PoCL, which gives each kernel a copy of its own, the copy kernel's instance.
TEST_F(OpenClSoftwareLink, VariablesAreCopiedThroughDevdlsKernelsLinkedWithTheImage) {
  DeviceImage lib = read("counter_lib.spv");
  const std::string variables[] = {"SharedCounter", "NotThere"};
  std::vector<uint32_t> words(lib.bytes.size() / 4);
  std::memcpy(words.data(), lib.bytes.data(), words.size() * 4);
  auto kernels = backend::copyKernels(words, variables);
  ASSERT_TRUE(!!kernels) << errorText(kernels);
  DeviceImage copies;
  copies.format = ImageFormat::SpirV;
  copies.bytes = Bytes(reinterpret_cast<const uint8_t *>(kernels->data()), kernels->size() * 4);
  const DeviceImage *plan[] = {&lib, &copies};
  const std::string labels[] = {"counter_lib.spv: image 0 (spirv)", "devdl's copy kernels"};
  auto linked = backend::linkSpirv(plan, labels);
  ASSERT_TRUE(!!linked) << errorText(linked);
  // As a device that takes IL gets it (optimized across the images), here translated for PoCL.
  auto optimized = backend::optimizeSpirv(*linked);
  ASSERT_TRUE(!!optimized) << errorText(optimized);
  auto spir = backend::spirvToSpir(*optimized);  // nothing placed
  ASSERT_TRUE(!!spir) << errorText(spir);
  auto program = device_->buildSpir(*spir);
  ASSERT_TRUE(!!program) << errorText(program);
  int value = 0;
  ASSERT_FALSE((*program)->copyVariable("SharedCounter", 0, &value, sizeof value, false));
  EXPECT_EQ(value, 3) << "its initial value";
  value = 40;
  ASSERT_FALSE((*program)->copyVariable("SharedCounter", 0, &value, sizeof value, true));
  value = 0;
  ASSERT_FALSE((*program)->copyVariable("SharedCounter", 0, &value, sizeof value, false));
  EXPECT_EQ(value, 40);
  EXPECT_EQ(errorText((*program)->variable("SharedCounter")),
            "`SharedCounter` is a device variable: OpenCL device " + device_->name() +
                " gives no device addresses of program variables");
  llvm::Error outside = (*program)->copyVariable("SharedCounter", 2, &value, sizeof value, false);
  EXPECT_EQ(llvm::toString(std::move(outside)), "variable `SharedCounter` has 4 bytes: 4 at offset 2 are outside it");
  EXPECT_EQ(errorText(backend::copyKernels(words, std::vector<std::string>{"NotThere"})),
            "the image exports none of the variables to copy");
}

// A program's variables moved to host memory (PoCL builds each kernel apart) are where its kernels
// look: laid out as the device lays them out (padding, vectors, alignment), initialized, the
// addresses their initializers hold relocated; the host reads and writes them there.
TEST_F(OpenClSoftwareLink, VariablesMovedToHostMemoryAreWhereTheKernelsLook) {
  DeviceImage image = read("placed_variables.spv");
  const DeviceImage *plan[] = {&image};
  const std::string labels[] = {"placed_variables.spv: image 0 (spirv)"};
  auto linked = backend::linkSpirv(plan, labels);
  ASSERT_TRUE(!!linked) << errorText(linked);
  std::unique_ptr<backend::opencl::HostVariables> region;
  auto place = [&](const backend::VariableLayout &layout) -> llvm::Expected<uint64_t> {
    auto placed = backend::opencl::HostVariables::place(layout, 1);
    if (!placed) return placed.takeError();
    region = std::move(*placed);
    return region->address();
  };
  auto spir = backend::spirvToSpir(*linked, {}, /*optimize=*/true, place);
  ASSERT_TRUE(!!spir) << errorText(spir);
  ASSERT_NE(region, nullptr) << "nothing placed";
  std::vector<std::string> names;
  for (const auto &variable : region->layout().variables) names.push_back(variable.name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"Aligned", "Generic", "Record", "Table", "Text", "Third", "Vector3", "Zeros"}));
  EXPECT_EQ(region->find("Record")->size, 24u) << "char, long, short: padded";
  EXPECT_EQ(region->find("Vector3")->size, 16u);
  EXPECT_EQ(region->find("Aligned")->offset % 64, 0u);
  EXPECT_EQ(region->layout().relocations.size(), 2u) << "Third's and Generic's";
  auto at = [&](const char *name) { return region->data(*region->find(name)); };
  int table[4];
  std::memcpy(table, at("Table"), sizeof table);
  EXPECT_EQ(table[3], 40) << "initialized";
  const int written = 99;
  std::memcpy(at("Table") + 2 * sizeof(int), &written, sizeof written);

  auto program = device_->buildSpir(*spir);
  ASSERT_TRUE(!!program) << errorText(program);
  (*program)->holdVariables(std::move(region));
  EXPECT_EQ(run(**program, "ReadBack", 9), (std::vector<int>{1, 2, 3, 6, 'd', 99, 20, 11, 0}));
  const backend::opencl::HostVariables &variables = *(*program)->hostVariables();
  int zero = 0;
  std::memcpy(&zero, variables.data(*variables.find("Zeros")) + 999 * sizeof(int), sizeof zero);
  EXPECT_EQ(zero, 100) << "what the kernel wrote, where the host reads it";
  EXPECT_EQ(variables.data(*variables.find("Text"))[0], 'A');
  EXPECT_EQ(variables.data(*variables.find("Record"))[0], 2);
}

// The functions a SPIR module defines, and those its kernel `kernel` calls.
struct SpirFunctions {
  std::vector<std::string> defined, calledByKernel;
};
SpirFunctions spirFunctions(const std::string &bitcode, const std::string &kernel) {
  SpirFunctions out;
  llvm::LLVMContext context;
  auto module = llvm::parseBitcodeFile(llvm::MemoryBufferRef(bitcode, "spir"), context);
  EXPECT_TRUE(!!module) << errorText(module);
  if (!module) return out;
  for (const llvm::Function &f : **module) {
    if (!f.isDeclaration()) out.defined.push_back(f.getName().str());
    if (f.getName() != kernel) continue;
    for (const llvm::BasicBlock &block : f)
      for (const llvm::Instruction &i : block)
        if (const auto *call = llvm::dyn_cast<llvm::CallInst>(&i); call && call->getCalledFunction())
          out.calledByKernel.push_back(call->getCalledFunction()->getName().str());
  }
  return out;
}

TEST_F(OpenClSoftwareLink, OptimizedAcrossImagesTheLibraryIsInlined) {
  // Load-time LTO: the chain's three images, linked and translated with and without the
  // optimization across images. With it, the kernel calls nothing of the chain's (inlined, and
  // the functions gone); without it, the calls cross the former image boundaries as compiled.
  const std::vector<uint32_t> linked = link({"chain_top.spv", "chain_mid.spv", "chain_base.spv"});
  auto plain = backend::spirvToSpir(linked, {}, false);
  auto optimized = backend::spirvToSpir(linked, {}, true);
  ASSERT_TRUE(!!plain && !!optimized) << errorText(plain) << errorText(optimized);
  const SpirFunctions before = spirFunctions(*plain, "ChainKernel"), after = spirFunctions(*optimized, "ChainKernel");
  EXPECT_TRUE(std::find(before.calledByKernel.begin(), before.calledByKernel.end(), "ChainMid") !=
              before.calledByKernel.end());
  EXPECT_EQ(before.defined.size(), 3u);
  EXPECT_EQ(after.defined, (std::vector<std::string>{"ChainKernel"}));
  EXPECT_TRUE(std::none_of(after.calledByKernel.begin(), after.calledByKernel.end(),
                           [](const std::string &name) { return name.starts_with("Chain"); }));
  // Both compute (i + 3) * 2 + 1 on the device.
  for (const std::string *spir : {&*plain, &*optimized}) {
    auto program = device_->buildSpir(*spir);
    ASSERT_TRUE(!!program) << errorText(program);
    EXPECT_EQ(run(**program, "ChainKernel", 4), (std::vector<int>{7, 9, 11, 13}));
  }
}

// How many instructions of `opcode` a module has.
size_t countOpcode(const std::vector<uint32_t> &words, uint32_t opcode) {
  size_t n = 0;
  for (size_t at = 5; at < words.size() && (words[at] >> 16); at += words[at] >> 16) n += (words[at] & 0xffff) == opcode;
  return n;
}

// Whether a module names something `name` (OpName).
bool names(const std::vector<uint32_t> &words, std::string_view name) {
  for (size_t at = 5; at < words.size() && (words[at] >> 16); at += words[at] >> 16)
    if ((words[at] & 0xffff) == 5 /* OpName */ && (words[at] >> 16) > 2 &&
        std::string_view(reinterpret_cast<const char *>(&words[at + 2])).substr(0, ((words[at] >> 16) - 2) * 4) == name)
      return true;
  return false;
}

TEST_F(OpenClSoftwareLink, OptimizedAcrossImagesAsSpirvForDevicesThatTakeIl) {
  // What an IL device is given: the chain optimized through LLVM and written back as SPIR-V,
  // valid (optimizeSpirv validates it), the chain's functions gone, inlined into the kernel: one
  // call is left, the translator's entry point calling the kernel's body, where the linked module
  // has two more. No device here takes IL: its meaning is checked by translating it to SPIR for PoCL.
  const std::vector<uint32_t> linked = link({"chain_top.spv", "chain_mid.spv", "chain_base.spv"});
  EXPECT_TRUE(names(linked, "ChainMid") && names(linked, "ChainBase"));
  EXPECT_EQ(countOpcode(linked, 57 /* OpFunctionCall */), 3u);
  auto optimized = backend::optimizeSpirv(linked);
  ASSERT_TRUE(!!optimized) << errorText(optimized);
  EXPECT_FALSE(names(*optimized, "ChainMid") || names(*optimized, "ChainBase"));
  EXPECT_EQ(countOpcode(*optimized, 57), 1u);
  EXPECT_LE((*optimized)[1], linked[1]) << "written back within the linked module's SPIR-V version";
  auto spir = backend::spirvToSpir(*optimized);
  ASSERT_TRUE(!!spir) << errorText(spir);
  auto program = device_->buildSpir(*spir);
  ASSERT_TRUE(!!program) << errorText(program);
  EXPECT_EQ(run(**program, "ChainKernel", 4), (std::vector<int>{7, 9, 11, 13}));
}

TEST_F(OpenClSoftwareLink, OptimizedAsSpirvWithTheConstantsApplied) {
  // The constants set are applied in the optimized module (none is left for the driver to
  // set); those not set keep their defaults. SpecKernel: out[i] = i * Scale + Offset, Scale
  // (SpecId 3) set to 10, Offset (SpecId 7) left at 5.
  DeviceImage kernel = read("spec_kernel.spv");
  std::vector<uint32_t> words(kernel.bytes.size() / 4);
  std::memcpy(words.data(), kernel.bytes.data(), words.size() * 4);
  const backend::SpecConstant scale{3, 10};
  auto optimized = backend::optimizeSpirv(words, {&scale, 1});
  ASSERT_TRUE(!!optimized) << errorText(optimized);
  EXPECT_EQ(decorated(*optimized, 1 /* SpecId */), std::vector<uint32_t>{});
  auto spir = backend::spirvToSpir(*optimized);
  ASSERT_TRUE(!!spir) << errorText(spir);
  auto program = device_->buildSpir(*spir);
  ASSERT_TRUE(!!program) << errorText(program);
  EXPECT_EQ(run(**program, "SpecKernel", 4), (std::vector<int>{5, 15, 25, 35}));
}

TEST_F(OpenClSoftwareLink, AParameterHintTheTranslatorHasNoAttributeForIsDropped) {
  // FuncParamAttr NoReadWrite, valid SPIR-V: the translator's reader has no LLVM attribute for it
  // and asserted (fuzz_link). SpecKernel's parameters, each so marked, are written all the same:
  // had the hint reached LLVM, the stores could be gone; dropped, the kernel runs as written.
  DeviceImage kernel = read("spec_kernel.spv");
  std::vector<uint32_t> words(kernel.bytes.size() / 4);
  std::memcpy(words.data(), kernel.bytes.data(), words.size() * 4);
  size_t hints = 0;
  for (size_t at = 5; at < words.size() && (words[at] >> 16); at += words[at] >> 16)
    if ((words[at] & 0xffff) == 71 /* OpDecorate */ && (words[at] >> 16) == 4 && words[at + 2] == 38 /* FuncParamAttr */) {
      words[at + 3] = 7;  // NoReadWrite
      ++hints;
    }
  ASSERT_EQ(hints, 2u);
  auto optimized = backend::optimizeSpirv(words);
  ASSERT_TRUE(!!optimized) << errorText(optimized);
  auto spir = backend::spirvToSpir(*optimized);
  ASSERT_TRUE(!!spir) << errorText(spir);
  auto program = device_->buildSpir(*spir);
  ASSERT_TRUE(!!program) << errorText(program);
  EXPECT_EQ(run(**program, "SpecKernel", 4), (std::vector<int>{5, 8, 11, 14}));
}

TEST_F(OpenClSoftwareLink, MissingLibraryNamesTheSymbol) {
  DeviceImage app = read("app.spv");
  const DeviceImage *plan[] = {&app};
  const std::string labels[] = {"app.spv: image 0 (spirv)"};
  auto linked = backend::linkSpirv(plan, labels);
  ASSERT_FALSE(!!linked);
  const std::string message = errorText(linked);
  EXPECT_NE(message.find("LibDeviceFunc"), std::string::npos) << message;
  EXPECT_NE(message.find("app.spv: image 0 (spirv)"), std::string::npos) << message;
}

TEST_F(OpenClSoftwareLink, BadBinaryIsRefused) {
  auto program = device_->buildSpir("this is not bitcode");
  ASSERT_FALSE(!!program);
  const std::string message = errorText(program);
  EXPECT_NE(message.find("failed: CL_"), std::string::npos) << message;
}

// The application alone, translated without its library: the device compiler's own link fails,
// and its log is in the error.
TEST_F(OpenClSoftwareLink, UnresolvedCallFailsTheBuildWithItsLog) {
  DeviceImage app = read("app.spv");
  std::vector<uint32_t> words(app.bytes.size() / 4);
  std::memcpy(words.data(), app.bytes.data(), app.bytes.size());
  auto spir = backend::spirvToSpir(words);
  ASSERT_TRUE(!!spir) << errorText(spir);
  auto program = device_->buildSpir(*spir);
  ASSERT_FALSE(!!program);
  const std::string message = errorText(program);
  RecordProperty("message", message);
  EXPECT_NE(message.find("clBuildProgram on " + device_->name() + " failed: CL_BUILD_PROGRAM_FAILURE"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("LibDeviceFunc"), std::string::npos) << message;
}

// The copy kernels linked by the driver (clCompileProgram each, clLinkProgram), as devdl links
// them on a device that takes IL, has a linker and gives no variables' addresses. Run on Intel's
// OpenCL CPU runtime (the IntelOpenCl configuration), which does give addresses: the program is
// read here through a Program made without them.
TEST(OpenClDriverLink, VariablesAreCopiedThroughDevdlsKernelsLinkedByTheDriver) {
  const bool intel = std::getenv("DEVDL_TEST_INTEL_OPENCL");
  if (intel) setenv("OCL_ICD_VENDORS", DEVDL_TEST_INTEL_OPENCL_ICD, 1);
  auto device = Device::openDefault();
  if (!device && intel) FAIL() << DEVDL_TEST_INTEL_OPENCL_ICD << ": " << llvm::toString(device.takeError());
  if (!device) GTEST_SKIP() << "no OpenCL device to run on: " << llvm::toString(device.takeError());
  if (!(*device)->capabilities().spirvIl || !(*device)->capabilities().linker)
    GTEST_SKIP() << "OpenCL device " << (*device)->name() << " has no linker of SPIR-V IL (the IntelOpenCl "
                 << "configuration runs this test on Intel's runtime)";
  auto file = readImageFile(image("counter_lib.spv"));
  ASSERT_TRUE(!!file) << errorText(file);
  const DeviceImage &lib = file->images[0];
  std::vector<uint32_t> words(lib.bytes.size() / 4);
  std::memcpy(words.data(), lib.bytes.data(), words.size() * 4);
  const std::string variables[] = {"SharedCounter"};
  auto kernels = backend::copyKernels(words, variables);
  ASSERT_TRUE(!!kernels) << errorText(kernels);
  DeviceImage copies;
  copies.format = ImageFormat::SpirV;
  copies.bytes = Bytes(reinterpret_cast<const uint8_t *>(kernels->data()), kernels->size() * 4);
  const backend::LinkInput inputs[] = {{&lib, "counter_lib.spv: image 0 (spirv)"}, {&copies, "devdl's copy kernels"}};
  auto linked = (*device)->linkObjects(inputs);
  ASSERT_TRUE(!!linked) << errorText(linked);
  const auto &cl = *backend::opencl::api();
  ASSERT_EQ(clRetainProgram((*linked)->get()), CL_SUCCESS);  // the reference `program` lets go
  backend::opencl::Program program(cl, (*linked)->get(), (*device)->name(), (*device)->id());  // no addresses
  int value = 0;
  ASSERT_FALSE(program.copyVariable("SharedCounter", 0, &value, sizeof value, false));
  EXPECT_EQ(value, 3) << "its initial value";
  value = 40;
  ASSERT_FALSE(program.copyVariable("SharedCounter", 0, &value, sizeof value, true));
  value = 0;
  ASSERT_FALSE(program.copyVariable("SharedCounter", 0, &value, sizeof value, false));
  EXPECT_EQ(value, 40);
  llvm::Error outside = program.copyVariable("SharedCounter", 2, &value, sizeof value, false);
  EXPECT_EQ(llvm::toString(std::move(outside)), "variable `SharedCounter` has 4 bytes: 4 at offset 2 are outside it");
}

}  // namespace
}  // namespace devdl::test
