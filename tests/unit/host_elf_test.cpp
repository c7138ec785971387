// Host ELF files that carry bundles: read from the file, and found in the memory of this
// process (the test links devdl_test_linked and opens devdl_test_plugin with dlopen).
#include "bundle/host_elf.h"
#include "host/loaded_bundles.h"
#include "image/read_image.h"
#include "test_support.h"

#include <llvm/Object/ObjectFile.h>

#include <dlfcn.h>
#include <xxhash.h>  // the reference: libxxhash

#include <cstdio>
#include <filesystem>

extern "C" const char *devdl_test_carrier(void);

namespace devdl::test {
namespace {

TEST(HostElf, SharedLibraryShowsItsBundleFromTheFile) {
  auto file = readImageFile(DEVDL_TEST_LINKED);
  ASSERT_TRUE(!!file) << errorText(file);
  ASSERT_EQ(file->images.size(), 1u);
  EXPECT_EQ(file->images[0].moduleId(), "liblinked");
  EXPECT_TRUE(contains(symbolLines(file->images[0]), "T LibDeviceFunc"));
}

TEST(HostElf, DefaultBundleSymbolNamesTheBundlesXxh3InSixteenHexDigits) {
  for (const std::string bundle : {"a bundle", "another"}) {
    char hash[17];
    std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(XXH3_64bits(bundle.data(), bundle.size())));
    EXPECT_EQ(bundle::defaultBundleSymbol(asBytes(bundle)), std::string("__devdl_bundle_") + hash);
  }
}

std::vector<std::string> loadedModuleIds(const std::string &objectSuffix) {
  std::vector<std::string> ids;
  for (const host::LoadedBundle &b : host::findLoadedBundles().bundles) {
    if (!b.object.ends_with(objectSuffix)) continue;
    auto images = readBundleImages(b.bytes, nullptr);
    EXPECT_TRUE(!!images) << errorText(images);
    if (images)
      for (const DeviceImage &img : *images) ids.emplace_back(img.moduleId());
  }
  return ids;
}

TEST(HostElf, LoadedObjectsShowTheirBundlesInLinkMapOrder) {
  ASSERT_STREQ(devdl_test_carrier(), "devdl_test_linked");  // keeps the DT_NEEDED entry
  const std::string linked = std::filesystem::path(DEVDL_TEST_LINKED).filename();
  const std::string plugin = std::filesystem::path(DEVDL_TEST_PLUGIN).filename();
  EXPECT_EQ(loadedModuleIds(linked), std::vector<std::string>{"liblinked"});
  EXPECT_TRUE(loadedModuleIds(plugin).empty()) << "not loaded yet";
  // A list says which generation of the host's objects it is, as loadedObjectsGeneration does.
  const uint64_t before = host::findLoadedBundles().generation;
  EXPECT_EQ(before, host::loadedObjectsGeneration());

  void *handle = dlopen(DEVDL_TEST_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  EXPECT_EQ(loadedModuleIds(plugin), std::vector<std::string>{"libplugin"});
  const uint64_t opened = host::findLoadedBundles().generation;
  EXPECT_NE(opened, before) << "a load moves it";
  EXPECT_EQ(opened, host::loadedObjectsGeneration());
  // The in-memory bundle is the one in the file, byte for byte.
  auto fromFile = readImageFile(DEVDL_TEST_PLUGIN);
  ASSERT_TRUE(!!fromFile) << errorText(fromFile);
  std::vector<std::string> order;
  for (const host::LoadedBundle &b : host::findLoadedBundles().bundles) {
    order.push_back(std::filesystem::path(b.object).filename());
    if (b.object.ends_with(plugin)) {
      auto images = readBundleImages(b.bytes, nullptr);
      ASSERT_TRUE(!!images) << errorText(images);
      EXPECT_EQ(asText((*images)[0].bytes), asText(fromFile->images[0].bytes));
    }
  }
  EXPECT_EQ(order, (std::vector<std::string>{linked, plugin})) << "link-map order";

  ASSERT_EQ(dlclose(handle), 0);
  EXPECT_TRUE(loadedModuleIds(plugin).empty()) << "gone after dlclose";
  EXPECT_NE(host::findLoadedBundles().generation, opened) << "an unload moves it";
}

// The loaded bundle of the object whose path ends with `suffix`.
std::optional<host::LoadedBundle> loadedBundleOf(const std::string &suffix) {
  for (host::LoadedBundle &b : host::findLoadedBundles().bundles)
    if (b.object.ends_with(suffix)) return std::move(b);
  return std::nullopt;
}

TEST(HostElf, GlobalScopeMembershipAsTheHostLoaderHasIt) {
  const std::string linked = std::filesystem::path(DEVDL_TEST_LINKED).filename();
  const std::string plugin = std::filesystem::path(DEVDL_TEST_PLUGIN).filename();
  auto startup = loadedBundleOf(linked);
  ASSERT_TRUE(startup);
  EXPECT_EQ(host::inGlobalScope(*startup), true) << "a library the program is linked with";
  // Its exports: the bundle's symbol first, then the carrier's function.
  ASSERT_GE(startup->exports.size(), 2u);
  EXPECT_TRUE(startup->exports[0].starts_with("__devdl_bundle_")) << startup->exports[0];
  EXPECT_TRUE(contains(startup->exports, "devdl_test_carrier"));

  void *handle = dlopen(DEVDL_TEST_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto local = loadedBundleOf(plugin);
  ASSERT_TRUE(local);
  EXPECT_EQ(host::inGlobalScope(*local), false) << "opened RTLD_LOCAL";
  ASSERT_EQ(dlopen(DEVDL_TEST_PLUGIN, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL), handle);
  EXPECT_EQ(host::inGlobalScope(*local), true) << "promoted";
  ASSERT_EQ(dlclose(handle), 0);
  // Asking left no dependency behind: the host's last dlclose unloads it.
  ASSERT_EQ(dlclose(handle), 0);
  EXPECT_EQ(dlopen(DEVDL_TEST_PLUGIN, RTLD_NOW | RTLD_NOLOAD), nullptr);
}

TEST(HostElf, ASecondCopyOfAGlobalLibraryCannotBeToldByItsExports) {
  // The twins carry one bundle and export the same names: while the first is global, every
  // export of the second is found as the first's, global or not.
  void *first = dlopen(DEVDL_TEST_TWIN_FIRST, RTLD_NOW | RTLD_GLOBAL);
  ASSERT_NE(first, nullptr) << dlerror();
  void *second = dlopen(DEVDL_TEST_TWIN_SECOND, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(second, nullptr) << dlerror();
  auto copy = loadedBundleOf(std::filesystem::path(DEVDL_TEST_TWIN_SECOND).filename());
  ASSERT_TRUE(copy);
  EXPECT_EQ(host::inGlobalScope(*copy), std::nullopt);
  ASSERT_EQ(dlclose(first), 0);
  EXPECT_EQ(host::inGlobalScope(*copy), false) << "told once the first is gone";
  ASSERT_EQ(dlclose(second), 0);
}

TEST(HostElf, AReferenceKeepsAnObjectLoaded) {
  const std::string plugin = std::filesystem::path(DEVDL_TEST_PLUGIN).filename();
  void *handle = dlopen(DEVDL_TEST_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto found = loadedBundleOf(plugin);
  ASSERT_TRUE(found);
  auto reference = host::ObjectReference::take(found->object, found->base);
  ASSERT_NE(reference, nullptr);
  EXPECT_EQ(host::ObjectReference::take(found->object, found->base + 4096), nullptr) << "not the load at that address";
  ASSERT_EQ(dlclose(handle), 0);
  EXPECT_TRUE(loadedBundleOf(plugin)) << "the reference keeps it loaded";
  reference.reset();
  EXPECT_FALSE(loadedBundleOf(plugin)) << "unloaded with the last reference";
  EXPECT_EQ(host::ObjectReference::take(found->object, found->base), nullptr);
}

TEST(HostElf, ObjectDefinesTheBundleSymbol) {
  const std::string bundleBytes = readFile(image("lib.spv"));
  auto object = bundle::makeHostObject(asBytes(bundleBytes), "", "__devdl_bundle_test");
  ASSERT_TRUE(!!object) << errorText(object);
  auto parsed = llvm::object::ObjectFile::createObjectFile(llvm::MemoryBufferRef(*object, "o"));
  ASSERT_TRUE(!!parsed) << llvm::toString(parsed.takeError());
  bool found = false;
  for (const auto &sym : (*parsed)->symbols()) {
    auto name = sym.getName();
    ASSERT_TRUE(!!name);
    if (*name == "__devdl_bundle_test") {
      found = true;
      auto flags = sym.getFlags();
      ASSERT_TRUE(!!flags);
      EXPECT_TRUE(*flags & llvm::object::SymbolRef::SF_Global);
    }
  }
  EXPECT_TRUE(found);
  auto bundles = bundle::findBundlesInElf(asBytes(*object));
  ASSERT_TRUE(!!bundles) << errorText(bundles);
  ASSERT_EQ(bundles->size(), 1u);
  EXPECT_EQ(asText((*bundles)[0]), bundleBytes);
}

TEST(HostElf, ForeignTargetsAreRefused) {
  auto object = bundle::makeHostObject(asBytes(std::string_view("x")), "x86_64-apple-macosx", "s");
  ASSERT_FALSE(!!object);
  EXPECT_NE(errorText(object).find("does not use ELF objects"), std::string::npos);
}

TEST(HostElf, AddingABundleToAnElfFile) {
  const std::string plain = readFile(DEVDL_TEST_PLAIN);
  auto none = readImageMemory(asBytes(plain), "plain.so", nullptr);
  ASSERT_FALSE(!!none);
  EXPECT_NE(errorText(none).find("plain.so: host ELF file carries no device images"), std::string::npos);

  auto lib = readImageFile(image("lib.spv"));
  ASSERT_TRUE(!!lib) << errorText(lib);
  const std::string packed = packImages(lib->images);
  auto added = bundle::addBundleToElf(asBytes(plain), asBytes(packed));
  ASSERT_TRUE(!!added) << errorText(added);
  auto file = readImageMemory(asBytes(*added), "plain+bundle.so", nullptr);
  ASSERT_TRUE(!!file) << errorText(file);
  EXPECT_EQ(symbolLines(file->images[0]), symbolLines(lib->images[0]));
}

TEST(HostElf, MalformedElfIsRefused) {
  std::string elf = readFile(DEVDL_TEST_LINKED);
  // Section header table offset (e_shoff, at 0x28 in ELF64) far past the end.
  std::string bad = elf;
  const uint64_t far = uint64_t(1) << 40;
  std::memcpy(&bad[0x28], &far, 8);
  auto file = readImageMemory(asBytes(bad), "bad.so", nullptr);
  ASSERT_FALSE(!!file);
  EXPECT_NE(errorText(file).find("bad.so: invalid ELF"), std::string::npos) << errorText(file);
  for (size_t size : {size_t(4), size_t(20), size_t(64), elf.size() / 2}) {
    auto cut = readImageMemory(asBytes(std::string_view(elf).substr(0, size)), "cut.so", nullptr);
    EXPECT_FALSE(!!cut) << size;
  }
}

}  // namespace
}  // namespace devdl::test
