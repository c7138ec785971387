// Resolution errors over the fake backend (unit/fake_backend.h), as RTLD_NOW's and RTLD_LAZY's:
// DEVDL_NOW resolves every import at the open or the open fails and leaves nothing; DEVDL_LAZY
// fails at the first symbol that needs the link. Every message names the file, the image and the
// symbol.
#include "loader/files.h"
#include "unit/loader_fixture.h"

#include "devdl.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace devdl::test {
namespace {

using LoaderErrors = LoaderFixture;

TEST_F(LoaderErrors, NowFailsNamingSymbolImageAndFile) {
  EXPECT_EQ(openError("app.spv", DEVDL_NOW), label("app.spv") + ": undefined device symbol `LibDeviceFunc`");
  // The failed open left nothing behind.
  EXPECT_FALSE(isLoaded("app.spv"));
  EXPECT_TRUE(loader_.snapshot().empty());
  EXPECT_TRUE(links().empty());
}

TEST_F(LoaderErrors, AFailedGlobalOpenLeavesNothingInTheGlobalScope) {
  EXPECT_EQ(openError("chain_mid.spv", DEVDL_NOW | DEVDL_GLOBAL),
            label("chain_mid.spv") + ": undefined device symbol `ChainBase`");
  EXPECT_TRUE(loader_.snapshot().empty());
  // chain_top's import of ChainMid finds nothing.
  void *top = open("chain_top.spv", DEVDL_LAZY);
  EXPECT_EQ(errorText(loader_.symbol(top, "ChainKernel")), label("chain_top.spv") + ": undefined device symbol `ChainMid`");
  close(top);
}

TEST_F(LoaderErrors, NowChecksTheImportsOfALibraryWithoutKernels) {
  // chain_mid has no kernel; it imports ChainBase. As RTLD_NOW, its imports resolve at the open
  // or the open fails and leaves nothing behind.
  EXPECT_EQ(openError("chain_mid.spv", DEVDL_NOW), label("chain_mid.spv") + ": undefined device symbol `ChainBase`");
  EXPECT_FALSE(isLoaded("chain_mid.spv"));
  // LAZY opens it; NOW does once its import is there.
  void *lazy = open("chain_mid.spv", DEVDL_LAZY);
  ASSERT_NE(lazy, nullptr);
  close(lazy);
  void *base = open("chain_base.spv", DEVDL_NOW | DEVDL_GLOBAL);
  void *mid = open("chain_mid.spv", DEVDL_NOW);
  EXPECT_NE(mid, nullptr);
  EXPECT_TRUE(links().empty()) << "resolved, not linked: no kernel needs a program";
  close(mid);
  close(base);
}

TEST_F(LoaderErrors, LazyFailsAtTheFirstSymbolThatNeedsTheLink) {
  void *app = open("app.spv", DEVDL_LAZY);
  ASSERT_NE(app, nullptr);
  EXPECT_EQ(errorText(loader_.symbol(app, "AppKernel")), label("app.spv") + ": undefined device symbol `LibDeviceFunc`");
  EXPECT_TRUE(links().empty());
  // Once the library is in the global scope, the same handle links.
  void *lib = open("lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  EXPECT_NE(symbol(app, "AppKernel"), nullptr);
  EXPECT_EQ(links(), (Links{{"app.spv", "lib.spv"}}));
  close(app);
  close(lib);
}

TEST_F(LoaderErrors, ReopeningALazyHandleNowLinksItNow) {
  const std::string undefined = label("app.spv") + ": undefined device symbol `LibDeviceFunc`";
  void *app = open("app.spv", DEVDL_LAZY);
  ASSERT_NE(app, nullptr);
  // As dlopen(RTLD_NOW) of a library already loaded lazily: the links are made now, and a
  // failure leaves the handle as it was (one reference).
  EXPECT_EQ(openError("app.spv", DEVDL_NOW), undefined);
  void *lib = open("lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  EXPECT_TRUE(links().empty()) << "a LAZY open links nothing";
  EXPECT_EQ(open("app.spv", DEVDL_NOW), app);
  EXPECT_EQ(links(), (Links{{"app.spv", "lib.spv"}})) << "linked at the second open";
  close(app);
  EXPECT_EQ(open("app.spv", DEVDL_LAZY | DEVDL_NOLOAD), app);  // one left, and this one
  close(app);
  close(app);
  EXPECT_FALSE(isLoaded("app.spv"));
  close(lib);
}

TEST_F(LoaderErrors, BadCallsAndMissingFilesAreNamed) {
  EXPECT_EQ(errorText(loader_.open("/nonexistent/lib.spv", DEVDL_NOW)), "/nonexistent/lib.spv: No such file or directory");
  EXPECT_EQ(openError("lib.spv", 0), "device_dlopen: flags must include DEVDL_LAZY or DEVDL_NOW");
  const std::string bytes = readFile(image("lib.spv"));
  EXPECT_EQ(errorText(loader_.openMemory(nullptr, 4, "none", DEVDL_LAZY)), "device_dlopen_mem: no data");
  EXPECT_EQ(errorText(loader_.openMemory(bytes.data(), bytes.size(), "lib", DEVDL_NOLOAD)),
            "device_dlopen_mem: flags must include DEVDL_LAZY or DEVDL_NOW");
  void *lib = open("lib.spv", DEVDL_LAZY);
  EXPECT_EQ(errorText(loader_.symbol(lib, "NoSuchSymbol")), image("lib.spv") + ": undefined device symbol `NoSuchSymbol`");
  EXPECT_EQ(errorText(loader_.planText(lib, "LibDeviceFunc")), "`LibDeviceFunc` is not a kernel");
  close(lib);
  EXPECT_TRUE(links().empty());
}

TEST_F(LoaderErrors, ThePlanOfAKernelSaysWhereEachImportBinds) {
  void *app = open("app.spv", DEVDL_LAZY);
  const std::string appLabel = label("app.spv");
  EXPECT_EQ(errorText(loader_.planText(app, "AppKernel")),
            "AppKernel: " + appLabel + "\n  LibDeviceFunc (" + appLabel + ") -> undefined\n");
  void *lib = open("lib.spv", DEVDL_LAZY | DEVDL_GLOBAL);
  auto plan = loader_.planText(app, "AppKernel");
  ASSERT_TRUE(!!plan) << llvm::toString(plan.takeError());
  EXPECT_EQ(*plan, "AppKernel: " + appLabel + "\n  LibDeviceFunc (" + appLabel + ") -> " + label("lib.spv") + "\n");
  EXPECT_TRUE(links().empty()) << "a plan is not a link";
  close(lib);
  close(app);
}

TEST_F(LoaderErrors, NamesWithoutASlashAreSearchedInTheLibraryPath) {
  // Like LD_LIBRARY_PATH: each directory in turn (missing and empty ones skipped).
  const std::string dir = std::filesystem::path(image("lib.spv")).parent_path().string();
  void *lib = nullptr;
  {
    ScopedVariable path("DEVDL_LIBRARY_PATH", "/nonexistent::" + dir);
    lib = openPath("lib.spv", DEVDL_LAZY);
  }
  ASSERT_NE(lib, nullptr);
  EXPECT_EQ(definitionOf(lib, "LibDeviceFunc"), dir + "/lib.spv: image 0 (spirv)");
  close(lib);
  // Without it, the name is not found, the error naming where it was looked for.
  EXPECT_EQ(errorText(loader_.open("lib.spv", DEVDL_LAZY)),
            "lib.spv: not found in " + defaultLibraryDirectory());
}

// As ld.so: a file of the name that cannot be opened is passed over, and the search goes on.
TEST_F(LoaderErrors, AFileOfTheNameThatCannotBeOpenedIsPassedOver) {
  const std::string dir = scratchDir(), fifoDir = dir + "/fifo", fileDir = dir + "/file";
  std::filesystem::create_directories(fifoDir);
  std::filesystem::create_directories(fileDir);
  ASSERT_EQ(mkfifo((fifoDir + "/lib.spv").c_str(), 0600), 0);  // opening it for reading would wait
  writeFile(fileDir + "/lib.spv", readFile(image("lib.spv")));
  void *lib = nullptr;
  {
    ScopedVariable path("DEVDL_LIBRARY_PATH", fifoDir + ":" + fileDir);
    lib = openPath("lib.spv", DEVDL_LAZY);
  }
  ASSERT_NE(lib, nullptr);
  EXPECT_EQ(definitionOf(lib, "LibDeviceFunc"), fileDir + "/lib.spv: image 0 (spirv)");
  close(lib);
  ScopedVariable path("DEVDL_LIBRARY_PATH", fifoDir);
  const std::string said = errorText(loader_.open("lib.spv", DEVDL_LAZY));
  EXPECT_EQ(said.rfind("lib.spv: not found in DEVDL_LIBRARY_PATH, " + defaultLibraryDirectory() + " (passed over: " +
                           fifoDir + "/lib.spv: ",
                       0),
            0u)
      << said;
}

// As ld.so: a name without a slash is never taken from the current directory, which whoever
// starts the program chose.
TEST_F(LoaderErrors, ANameOnlyInTheCurrentDirectoryIsNotFound) {
  const std::string dir = scratchDir(), before = std::filesystem::current_path();
  writeFile(dir + "/lib.spv", readFile(image("lib.spv")));
  std::filesystem::current_path(dir);
  auto opened = loader_.open("lib.spv", DEVDL_LAZY);
  std::filesystem::current_path(before);
  EXPECT_EQ(errorText(opened), "lib.spv: not found in " + defaultLibraryDirectory());
}

// Nor through a relative directory of DEVDL_LIBRARY_PATH (`.`, `sub`), which would be the current
// one's: passed over, as the error's list of places says.
TEST_F(LoaderErrors, ARelativeDirectoryOfTheLibraryPathIsPassedOver) {
  const std::string dir = scratchDir(), before = std::filesystem::current_path();
  std::filesystem::create_directories(dir + "/sub");
  writeFile(dir + "/lib.spv", readFile(image("lib.spv")));
  writeFile(dir + "/sub/lib.spv", readFile(image("lib.spv")));
  std::filesystem::current_path(dir);
  llvm::Expected<void *> opened = nullptr;
  {
    ScopedVariable path("DEVDL_LIBRARY_PATH", ".:sub");
    opened = loader_.open("lib.spv", DEVDL_LAZY);
  }
  std::filesystem::current_path(before);
  EXPECT_EQ(errorText(opened), "lib.spv: not found in DEVDL_LIBRARY_PATH (. not searched: relative, sub not searched: "
                               "relative), " + defaultLibraryDirectory());
}

// A handle is the file it read. Another file is never an open handle, though the filesystem gives
// it the inode of a loaded file deleted (ext4 does at once): devdl keeps each handle's file open,
// as ld.so's mapping keeps a library's inode. A file written over in place is another handle too.
TEST_F(LoaderErrors, AnotherFileIsNeverAnOpenHandle) {
  const std::string dir = scratchDir();
  auto inodeOf = [](const std::string &path) {
    struct stat status {};
    EXPECT_EQ(stat(path.c_str(), &status), 0) << path;
    return status.st_ino;
  };
  bool reuses = false;  // whether this filesystem gives a freed inode to the next file at all
  for (int i = 0; i < 20 && !reuses; ++i) {
    writeFile(dir + "/probe", "x");
    const ino_t freed = inodeOf(dir + "/probe");
    std::filesystem::remove(dir + "/probe");
    writeFile(dir + "/probe2", "y");
    reuses = inodeOf(dir + "/probe2") == freed;
    std::filesystem::remove(dir + "/probe2");
  }
  if (!reuses) GTEST_SKIP() << "this filesystem gave no freed inode to the next file in 20 tries";
  const std::string lib = dir + "/lib.spv";
  writeFile(lib, readFile(image("lib.spv")));
  const ino_t loaded = inodeOf(lib);
  void *old = openPath(lib, DEVDL_LAZY);
  ASSERT_NE(old, nullptr);
  std::filesystem::remove(lib);  // as `rm` before a `cp` of the new library
  for (int i = 0; i < 5; ++i) {
    const std::string other = dir + "/other" + std::to_string(i) + ".spv";
    writeFile(other, readFile(image("app.spv")));
    EXPECT_NE(inodeOf(other), loaded) << "the loaded file's inode is held";
    void *opened = openPath(other, DEVDL_LAZY);
    ASSERT_NE(opened, nullptr);
    EXPECT_NE(opened, old);
    EXPECT_EQ(definitionOf(opened, "AppKernel"), other + ": image 0 (spirv)");
    close(opened);
  }
  // Written over in place (the same inode), later: another handle, of the new bytes.
  const std::string kept = dir + "/kept.spv";
  writeFile(kept, readFile(image("lib.spv")));
  void *before = openPath(kept, DEVDL_LAZY);
  struct stat status {};
  ASSERT_EQ(stat(kept.c_str(), &status), 0);
  const ino_t inode = status.st_ino;
  {
    std::ofstream rewrite(kept, std::ios::binary | std::ios::trunc);
    rewrite << readFile(image("app.spv"));
  }
  const timespec later[2] = {{status.st_atim.tv_sec + 2, 0}, {status.st_mtim.tv_sec + 2, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, kept.c_str(), later, 0), 0);
  ASSERT_EQ(inodeOf(kept), inode);
  void *after = openPath(kept, DEVDL_LAZY);
  ASSERT_TRUE(before && after);
  EXPECT_NE(after, before);
  EXPECT_EQ(definitionOf(after, "AppKernel"), kept + ": image 0 (spirv)");
  EXPECT_EQ(definitionOf(before, "LibDeviceFunc"), kept + ": image 0 (spirv)") << "the old handle keeps its bytes";
  close(after);
  close(before);
  close(old);
}

// The installed directory (<libdir>/devdl, beside the library that holds devdl) comes after
// DEVDL_LIBRARY_PATH, as ld.so's own directories come after LD_LIBRARY_PATH.
TEST_F(LoaderErrors, TheLibraryPathComesBeforeTheDefaultDirectory) {
  const std::string installed = defaultLibraryDirectory();
  const std::string name = "devdl-test-" + std::to_string(getpid()) + ".spv";
  std::filesystem::create_directories(installed);
  writeFile(installed + "/" + name, readFile(image("lib.spv")));
  void *fromDefault = openPath(name.c_str(), DEVDL_LAZY);
  ASSERT_NE(fromDefault, nullptr);
  EXPECT_EQ(definitionOf(fromDefault, "LibDeviceFunc"), installed + "/" + name + ": image 0 (spirv)");
  close(fromDefault);
  const std::string dir = scratchDir();
  writeFile(dir + "/" + name, readFile(image("lib.spv")));
  void *fromPath = nullptr;
  {
    ScopedVariable path("DEVDL_LIBRARY_PATH", dir);
    fromPath = openPath(name.c_str(), DEVDL_LAZY);
  }
  std::filesystem::remove(installed + "/" + name);
  ASSERT_NE(fromPath, nullptr);
  EXPECT_EQ(definitionOf(fromPath, "LibDeviceFunc"), dir + "/" + name + ": image 0 (spirv)");
  close(fromPath);
}

}  // namespace
}  // namespace devdl::test
