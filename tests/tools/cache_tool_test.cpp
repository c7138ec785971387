// devdl-cache: list, verify and clear a cache filled through the library's own DiskCache.
#include "store/disk_cache.h"
#include "test_support.h"

#include <sys/stat.h>

namespace devdl {
namespace {

using test::run;

class CacheTool : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::scratchDir() + "/cache";
    store::DiskCache cache(dir_, ~uint64_t(0));
    cache.store(store::KeyBuilder().add("good").finish(), "Some Device\nlib.spv: image 0 (spirv)\napp.spv: image 0 (spirv)",
                "binary", 1);
    cache.store(store::KeyBuilder().add("bad").finish(), "Some Device\nother.spv: image 0 (spirv)", "binary", 1);
    bad_ = dir_ + "/" + store::KeyBuilder().add("bad").finish().hex() + ".devdl-cache";
    std::string bytes = test::readFile(bad_);
    bytes.back() ^= 1;
    test::writeFile(bad_, bytes);
    chmod(bad_.c_str(), 0600);
  }
  std::string dir_, bad_;
};

TEST_F(CacheTool, ListsEveryEntryAndWhetherItVerifies) {
  auto listed = run({DEVDL_CACHE_TOOL, "list", "--dir", dir_});
  ASSERT_EQ(listed.status, 0) << listed.err;
  EXPECT_NE(listed.out.find(dir_ + ": 2 entries"), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("ok  Some Device: lib.spv: image 0 (spirv), app.spv: image 0 (spirv)\n"), std::string::npos)
      << listed.out;
  EXPECT_NE(listed.out.find("BAD  checksum mismatch\n"), std::string::npos) << listed.out;
}

TEST_F(CacheTool, VerifyNamesTheBadEntriesAndFails) {
  auto verified = run({DEVDL_CACHE_TOOL, "verify", "--dir", dir_});
  EXPECT_EQ(verified.status, 1);
  EXPECT_EQ(verified.out, bad_ + ": checksum mismatch\n" + dir_ + ": 2 entries, 1 bad\n");
  std::remove(bad_.c_str());
  verified = run({DEVDL_CACHE_TOOL, "verify", "--dir", dir_});
  EXPECT_EQ(verified.status, 0) << verified.out;
}

TEST_F(CacheTool, ClearDeletesEverythingInTheDirectoryTheEnvironmentNames) {
  setenv("DEVDL_CACHE_DIR", dir_.c_str(), 1);
  unsetenv("DEVDL_CACHE");
  auto cleared = run({DEVDL_CACHE_TOOL, "clear"});
  unsetenv("DEVDL_CACHE_DIR");
  ASSERT_EQ(cleared.status, 0) << cleared.err;
  EXPECT_EQ(cleared.out, dir_ + ": deleted 2 files\n");
  EXPECT_TRUE(llvm::cantFail(store::DiskCache(dir_, ~uint64_t(0)).list()).empty());
}

TEST_F(CacheTool, ADirectoryItCannotReadIsAnError) {
  const std::string file = test::scratchDir() + "/file";
  test::writeFile(file, "not a directory");
  for (const char *command : {"list", "verify", "clear"}) {
    auto result = run({DEVDL_CACHE_TOOL, command, "--dir", file});
    EXPECT_EQ(result.status, 1) << command;
    EXPECT_EQ(result.err, "devdl-cache: " + file + ": Not a directory\n") << command;
    EXPECT_EQ(result.out, "") << command;
  }
  // One that does not exist is an empty cache.
  auto listed = run({DEVDL_CACHE_TOOL, "list", "--dir", file + ".none"});
  EXPECT_EQ(listed.status, 0) << listed.err;
  EXPECT_NE(listed.out.find(": 0 entries"), std::string::npos) << listed.out;
}

TEST_F(CacheTool, SaysWhenThereIsNoCache) {
  setenv("DEVDL_CACHE", "0", 1);
  auto listed = run({DEVDL_CACHE_TOOL, "list"});
  EXPECT_EQ(listed.status, 1);
  EXPECT_EQ(listed.err, "devdl-cache: no cache directory: DEVDL_CACHE=0\n");
  auto unknown = run({DEVDL_CACHE_TOOL, "purge", "--dir", dir_});
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE(unknown.err.find("unknown command `purge`"), std::string::npos);
}

}  // namespace
}  // namespace devdl
