// Programs and what they hold, over the fake backend (unit/fake_backend.h): images opened from
// memory, which live on with the programs that use them once their handle and memory are gone;
// the same code from another file sharing a program; specialization constants taking effect in
// the programs linked after they are set.
#include "unit/loader_fixture.h"

#include "devdl.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

namespace devdl::test {
namespace {

using LoaderPrograms = LoaderFixture;

std::string bytesOf(uint32_t value) { return std::string(reinterpret_cast<const char *>(&value), sizeof value); }

TEST_F(LoaderPrograms, OpenFromMemoryAndDescribeSymbols) {
  const std::string bytes = readFile(image("lib.spv"));
  auto lib = loader_.openMemory(bytes.data(), bytes.size(), "lib-in-memory", DEVDL_NOW | DEVDL_GLOBAL);
  ASSERT_TRUE(!!lib) << llvm::toString(lib.takeError());
  auto again = loader_.openMemory(bytes.data(), bytes.size(), "again", DEVDL_LAZY);
  ASSERT_TRUE(!!again) << llvm::toString(again.takeError());
  EXPECT_EQ(*again, *lib) << "same memory, same handle";
  auto global = loader_.open(nullptr, DEVDL_LAZY);
  ASSERT_TRUE(!!global);
  devdl_symbol_info info{};
  info.size = sizeof info;
  ASSERT_FALSE(!!loader_.symbolInfo(*global, "LibDeviceFunc", info));
  EXPECT_EQ(info.kind, DEVDL_SYMBOL_FUNCTION);
  EXPECT_STREQ(info.file, "lib-in-memory");
  EXPECT_EQ(info.image, 0u);
  EXPECT_STREQ(info.format, "spirv");
  ASSERT_FALSE(!!loader_.symbolInfo(*lib, "LibCounter", info));
  EXPECT_EQ(info.kind, DEVDL_SYMBOL_VARIABLE);
  EXPECT_EQ(definitionOf(*lib, "Nothing"), "lib-in-memory: undefined device symbol `Nothing`");

  void *app = open("app.spv", DEVDL_NOW);
  ASSERT_EQ(fake::links().size(), 1u);
  EXPECT_EQ(fake::links()[0].inputs, (std::vector<std::string>{label("app.spv"), "lib-in-memory: image 0 (spirv)"}));
  close(app);
  close(*lib);
  close(*lib);
  EXPECT_TRUE(loader_.snapshot().empty());
  const std::string bad = "\x03\x02\x23\x07 not really SPIR-V";
  const std::string junk = errorText(loader_.openMemory(bad.data(), bad.size(), "junk", DEVDL_LAZY));
  EXPECT_NE(junk.find("junk: image 0 (spirv): invalid SPIR-V"), std::string::npos) << junk;
}

// The memory given to openMemory need only live until the handle is closed, though the images
// live on with the programs that use them: nothing reads it afterwards (unmapped, any read would
// fault), and the plan and the name say what the kernel runs.
TEST_F(LoaderPrograms, AMemoryLibraryOutlivesItsHandleAndItsMemory) {
  const std::string bytes = readFile(image("lib.spv"));
  void *memory = mmap(nullptr, bytes.size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(memory, MAP_FAILED);
  std::memcpy(memory, bytes.data(), bytes.size());
  auto lib = loader_.openMemory(memory, bytes.size(), "lib-in-memory", DEVDL_LAZY | DEVDL_GLOBAL);
  ASSERT_TRUE(!!lib) << llvm::toString(lib.takeError());
  void *app = open("app.spv", DEVDL_LAZY);
  void *kernel = symbol(app, "AppKernel");
  ASSERT_NE(kernel, nullptr);
  close(*lib);
  ASSERT_EQ(munmap(memory, bytes.size()), 0);

  auto plan = loader_.planText(app, "AppKernel");
  ASSERT_TRUE(!!plan) << llvm::toString(plan.takeError());
  EXPECT_EQ(*plan, "AppKernel: " + label("app.spv") + "\n  LibDeviceFunc (" + label("app.spv") +
                       ") -> lib-in-memory: image 0 (spirv)\n");
  EXPECT_EQ(definitionOf(app, "LibDeviceFunc"), "lib-in-memory: image 0 (spirv)");
  EXPECT_EQ(symbol(app, "AppKernel"), kernel);
  EXPECT_EQ(links().size(), 1u);
  close(app);
}

TEST_F(LoaderPrograms, ClosingOneOfTwoFilesOfTheSameCodeKeepsTheProgramTheOtherUses) {
  const std::string copy = scratchDir() + "/app-copy.spv";
  std::filesystem::copy_file(image("app.spv"), copy);
  void *lib = open("lib.spv", DEVDL_NOW | DEVDL_GLOBAL);
  void *app = open("app.spv", DEVDL_NOW);
  void *again = openPath(copy, DEVDL_NOW);
  EXPECT_NE(again, app) << "another file: another handle";
  void *kernel = symbol(app, "AppKernel");
  EXPECT_EQ(symbol(again, "AppKernel"), kernel) << "the same images for the same device: one program";
  close(again);
  EXPECT_EQ(symbol(app, "AppKernel"), kernel);
  EXPECT_EQ(links().size(), 1u);
  close(app);
  close(lib);
}

TEST_F(LoaderPrograms, SpecializationConstantsSetForTheProgramsLinkedAfter) {
  void *handle = open("spec_kernel.spv", DEVDL_LAZY);
  void *defaults = symbol(handle, "SpecKernel");
  ASSERT_NE(defaults, nullptr);
  ASSERT_EQ(fake::links().size(), 1u);
  EXPECT_EQ(fake::links()[0].specConstants, (std::vector<backend::SpecConstants>{{}}));
  const uint32_t scale = 10, offset = 1;
  ASSERT_FALSE(!!loader_.specialize(handle, 3, bytesOf(scale)));
  ASSERT_FALSE(!!loader_.specialize(handle, 7, bytesOf(offset)));
  void *specialized = symbol(handle, "SpecKernel");
  EXPECT_NE(specialized, defaults) << "another program";
  ASSERT_EQ(fake::links().size(), 2u);
  EXPECT_EQ(fake::links()[1].specConstants,
            (std::vector<backend::SpecConstants>{{{3, bytesOf(scale)}, {7, bytesOf(offset)}}}));
  // The same values again: the program in memory.
  ASSERT_FALSE(!!loader_.specialize(handle, 3, bytesOf(scale)));
  EXPECT_EQ(symbol(handle, "SpecKernel"), specialized);
  EXPECT_EQ(links().size(), 2u);

  EXPECT_EQ(llvm::toString(loader_.specialize(handle, 99, bytesOf(scale))),
            image("spec_kernel.spv") + ": no image declares specialization constant 99");
  EXPECT_EQ(llvm::toString(loader_.specialize(handle, 3, "abc")),
            image("spec_kernel.spv") + ": specialization constant 3: a value of 3 bytes (1, 2, 4 or 8 are)");
  close(handle);
}

}  // namespace
// A build the device refuses (here an import left to the driver, which the fake device has not)
// is not built again at each lookup: the same error is given at once, until the loader changes
// (an image loaded or closed), which may make another program.
TEST_F(LoaderPrograms, AFailedBuildIsNotBuiltAgainUntilTheLoaderChanges) {
  void *app = open("devicelib_app.spv", DEVDL_LAZY);
  ASSERT_NE(app, nullptr);
  const std::string first = errorText(loader_.symbol(app, "DevicelibKernel"));
  EXPECT_NE(first.find("__devicelib_expf"), std::string::npos) << first;
  ASSERT_EQ(links().size(), 1u);
  EXPECT_EQ(errorText(loader_.symbol(app, "DevicelibKernel")), first);
  EXPECT_EQ(errorText(loader_.symbol(app, "DevicelibKernel")), first);
  EXPECT_EQ(links().size(), 1u) << "the failure given again, not built again";
  void *lib = open("lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  EXPECT_EQ(errorText(loader_.symbol(app, "DevicelibKernel")), first);
  EXPECT_EQ(links().size(), 2u) << "an image loaded: built again";
  close(lib);
  close(app);
}

}  // namespace devdl::test
