// The disk cache end to end: programs linked on PoCL, stored by one process and loaded by the
// next, through devdl_cache_probe (tests/e2e/cache_probe.c), which loads and runs a kernel as an
// application does and prints what it computed. What devdl did is read from the statistics
// line DEVDL_DEBUG=statistics prints at exit.
#include "backend/opencl/opencl_device.h"
#include "store/disk_cache.h"
#include "store/image_summary.h"
#include "test_support.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <memory>
#include <random>
#include <regex>
#include <thread>
#include <tuple>

namespace devdl {
namespace {

using test::Child;
using test::CommandResult;
using test::image;

const std::string kSeedOutput = "0 2 4 6 8 10 12 14\n";

struct Load {
  CommandResult result;
  int hits = -1, misses = -1, stored = -1, deleted = -1, waits = -1;
  std::string read, wrote;  // as the line says them: "5423 B", "47 KiB"
  double savedMs = -1;
  std::tuple<int, int, int> counts() const { return {hits, misses, stored}; }
};

// What DEVDL_DEBUG=statistics says of image files' summaries: used, missing, stored; none of
// them where it says nothing (no file was large and unchanged long enough to have one).
std::tuple<int, int, int> summaries(const Load &load) {
  static const std::regex line(R"(cache: image summaries: (\d+) used, (\d+) missing, (\d+) stored)");
  std::smatch m;
  if (!std::regex_search(load.result.err, m, line)) return {0, 0, 0};
  return {std::stoi(m[1]), std::stoi(m[2]), std::stoi(m[3])};
}

Load parse(CommandResult result) {
  Load load;
  load.result = std::move(result);
  static const std::regex line(R"(cache: (\d+) hits, (\d+) misses, (\d+) stored, (\d+) bad entries deleted, )"
                               R"(\d+ evicted; read (\d+ \w+), wrote (\d+ \w+); build time saved ([\d.]+) ms; )"
                               R"(waited for other processes' builds (\d+) times)");
  if (std::smatch m; std::regex_search(load.result.err, m, line)) {
    load.hits = std::stoi(m[1]);
    load.misses = std::stoi(m[2]);
    load.stored = std::stoi(m[3]);
    load.deleted = std::stoi(m[4]);
    load.read = m[5];
    load.wrote = m[6];
    load.savedMs = std::stod(m[7]);
    load.waits = std::stoi(m[8]);
  }
  return load;
}

std::vector<std::string> probeCommand(int loads, const std::string &kernel, const std::vector<std::string> &images) {
  std::vector<std::string> argv = {DEVDL_TEST_CACHE_PROBE, std::to_string(loads), kernel};
  for (const std::string &name : images) argv.push_back(image(name));
  return argv;
}

class DiskCacheE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    // DEVDL_TEST_INTEL_OPENCL: on Intel's OpenCL CPU runtime alone, which must be there.
    const bool intel = std::getenv("DEVDL_TEST_INTEL_OPENCL");
    if (intel) setenv("OCL_ICD_VENDORS", DEVDL_TEST_INTEL_OPENCL_ICD, 1);  // for the probes too
    auto device = backend::opencl::Device::openDefault();
    if (!device && intel) FAIL() << DEVDL_TEST_INTEL_OPENCL_ICD << ": " << llvm::toString(device.takeError());
    if (!device) GTEST_SKIP() << "no OpenCL device to build on: " << llvm::toString(device.takeError());
    for (const char *name : kVariables)
      if (const char *value = std::getenv(name)) saved_.emplace_back(name, value);
    unsetenv("DEVDL_CACHE");  // the test runner turns it off
    unsetenv("DEVDL_BUILD_OPTIONS");
    scratch_ = test::scratchDir();
    dir_ = scratch_ + "/cache";
    setenv("DEVDL_CACHE_DIR", dir_.c_str(), 1);
    setenv("DEVDL_DEBUG", "statistics", 1);
  }
  void TearDown() override {
    for (const char *name : kVariables) unsetenv(name);
    for (const auto &[name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
  }

  Load seed(int loads = 1) { return parse(test::run(probeCommand(loads, "AppKernel", {"lib.spv", "app.spv"}))); }
  Load value(const char *definer) {
    return parse(test::run(probeCommand(1, "ValueKernel", {definer, "value_user.spv"})));
  }
  std::vector<store::EntryFile> entries() const { return llvm::cantFail(store::DiskCache(dir_, ~uint64_t(0)).list()); }

  // lib_large.spv (94 KiB, with the seed's library function) copied where the test may change it,
  // once it last changed long enough ago to be summarized.
  std::string largeLibrary() const {
    const std::string path = scratch_ + "/lib_large.spv";
    test::writeFile(path, test::readFile(image("lib_large.spv")));
    std::this_thread::sleep_for(std::chrono::seconds(store::kSettledSeconds) + std::chrono::milliseconds(50));
    return path;
  }
  // The seed's program with `library` in place of lib.spv; `options` first (--spec, --flip-after-open...).
  static Load seedWith(const std::string &library, std::vector<std::string> options = {}) {
    std::vector<std::string> argv = {DEVDL_TEST_CACHE_PROBE};
    argv.insert(argv.end(), options.begin(), options.end());
    for (const std::string &arg : {std::string("1"), std::string("AppKernel"), library, image("app.spv")})
      argv.push_back(arg);
    return parse(test::run(argv));
  }

  std::string scratch_, dir_;

 private:
  // What the tests set, restored after each.
  static constexpr const char *kVariables[] = {"DEVDL_CACHE",    "DEVDL_CACHE_DIR", "DEVDL_CACHE_MAX_SIZE", "DEVDL_BUILD_OPTIONS",
                                               "XDG_CACHE_HOME", "DEVDL_DEBUG",     "DEVDL_PRELOAD"};
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(DiskCacheE2E, OneProcessStoresTheNextLoads) {
  Load cold = seed(), warm = seed();
  for (const Load *load : {&cold, &warm}) {
    ASSERT_EQ(load->result.status, 0) << load->result.err;
    EXPECT_EQ(load->result.out, kSeedOutput);
  }
  EXPECT_EQ(cold.counts(), std::make_tuple(0, 1, 1)) << "hits, misses, stored";
  EXPECT_EQ(warm.counts(), std::make_tuple(1, 0, 0)) << "hits, misses, stored";
  EXPECT_NE(warm.result.err.find("loaded from the disk cache"), std::string::npos) << warm.result.err;
  const auto files = entries();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].problem, "");
  EXPECT_NE(files[0].description.find("app.spv: image 0 (spirv)"), std::string::npos) << files[0].description;
  // The statistics count the entry's bytes both ways, and the build the hit did not do.
  EXPECT_EQ(cold.wrote, store::bytesText(files[0].size));
  EXPECT_EQ(cold.read, "0 B");
  EXPECT_EQ(warm.read, store::bytesText(files[0].size));
  EXPECT_EQ(warm.wrote, "0 B");
  EXPECT_EQ(cold.savedMs, 0);
  // And the build the hit did not do: the entry keeps its time; what the hit saved of it, less
  // its own load, depends on how busy the machine is (it was 0 once, under load).
  auto entry = store::DiskCache(dir_, ~uint64_t(0)).load(files[0].key);
  ASSERT_TRUE(entry.has_value());
  EXPECT_GT(entry->buildNanoseconds, 0u);
  EXPECT_GE(warm.savedMs, 0) << "reported: " << warm.result.err;
}

TEST_F(DiskCacheE2E, AnotherImageIsAnotherEntry) {
  Load one = value("value_one.spv");
  ASSERT_EQ(one.result.status, 0) << one.result.err;
  EXPECT_EQ(one.result.out, "1 1 1 1 1 1 1 1\n");
  Load two = value("value_two.spv");
  ASSERT_EQ(two.result.status, 0) << two.result.err;
  EXPECT_EQ(two.result.out, "2 2 2 2 2 2 2 2\n");
  EXPECT_EQ(two.misses, 1) << "value_two.spv in place of value_one.spv is a miss";
  EXPECT_EQ(entries().size(), 2u);
  Load again = value("value_one.spv");
  EXPECT_EQ(again.result.out, "1 1 1 1 1 1 1 1\n");
  EXPECT_EQ(again.hits, 1);
}

TEST_F(DiskCacheE2E, OtherBuildOptionsAreAnotherEntry) {
  EXPECT_EQ(seed().misses, 1);
  setenv("DEVDL_BUILD_OPTIONS", "-cl-fast-relaxed-math", 1);
  Load fast = seed();
  ASSERT_EQ(fast.result.status, 0) << fast.result.err;
  EXPECT_EQ(fast.result.out, kSeedOutput);
  EXPECT_EQ(fast.misses, 1);
  EXPECT_EQ(seed().hits, 1);
  unsetenv("DEVDL_BUILD_OPTIONS");
  EXPECT_EQ(seed().hits, 1);
  EXPECT_EQ(entries().size(), 2u);
}

TEST_F(DiskCacheE2E, OtherSpecializationConstantsAreAnotherEntry) {
  auto spec = [](std::vector<std::string> values) {
    std::vector<std::string> argv = {DEVDL_TEST_CACHE_PROBE};
    for (const std::string &v : values) argv.insert(argv.end(), {"--spec", v});
    for (const char *arg : {"1", "SpecKernel"}) argv.push_back(arg);
    argv.push_back(image("spec_kernel.spv"));
    return parse(test::run(argv));
  };
  Load defaults = spec({});
  ASSERT_EQ(defaults.result.status, 0) << defaults.result.err;
  EXPECT_EQ(defaults.result.out, "5 8 11 14 17 20 23 26\n");  // i * 3 + 5
  EXPECT_EQ(defaults.counts(), std::make_tuple(0, 1, 1));
  Load set = spec({"3=10", "7=1"});
  ASSERT_EQ(set.result.status, 0) << set.result.err;
  EXPECT_EQ(set.result.out, "1 11 21 31 41 51 61 71\n");
  EXPECT_EQ(set.counts(), std::make_tuple(0, 1, 1)) << "other values: another program";
  EXPECT_EQ(spec({"3=10", "7=1"}).counts(), std::make_tuple(1, 0, 0));
  Load again = spec({});
  EXPECT_EQ(again.result.out, "5 8 11 14 17 20 23 26\n");
  EXPECT_EQ(again.counts(), std::make_tuple(1, 0, 0));
  EXPECT_EQ(entries().size(), 2u);
}

TEST_F(DiskCacheE2E, DamagedEntriesAreRebuilt) {
  ASSERT_EQ(seed().stored, 1);
  ASSERT_EQ(entries().size(), 1u);
  const std::string path = entries()[0].path;
  for (const char *damage : {"flip", "truncate"}) {
    SCOPED_TRACE(damage);
    std::string bytes = test::readFile(path);
    if (std::string_view(damage) == "flip") bytes[bytes.size() / 2] ^= 0x01;
    else bytes.resize(bytes.size() - 100);
    test::writeFile(path, bytes);
    chmod(path.c_str(), 0600);
    Load rebuilt = seed();
    ASSERT_EQ(rebuilt.result.status, 0) << rebuilt.result.err;
    EXPECT_EQ(rebuilt.result.out, kSeedOutput);
    EXPECT_EQ(rebuilt.deleted, 1);
    EXPECT_EQ(rebuilt.stored, 1);
    EXPECT_NE(rebuilt.result.err.find(damage[0] == 'f' ? "checksum mismatch" : "truncated"), std::string::npos)
        << rebuilt.result.err;
    ASSERT_EQ(entries().size(), 1u);
    EXPECT_EQ(entries()[0].problem, "");
  }
}

TEST_F(DiskCacheE2E, EightProcessesOfFiftyLoadsShareOneCache) {
  std::vector<std::unique_ptr<Child>> children;
  for (int i = 0; i < 8; ++i)
    children.push_back(std::make_unique<Child>(
        i % 2 ? probeCommand(50, "AppKernel", {"lib.spv", "app.spv"})
              : probeCommand(50, "ValueKernel", {i % 4 ? "value_one.spv" : "value_two.spv", "value_user.spv"})));
  for (int i = 0; i < 8; ++i) {
    Load load = parse(children[i]->wait());
    ASSERT_EQ(load.result.status, 0) << "process " << i << ": " << load.result.err;
    EXPECT_EQ(load.result.out, i % 2 ? kSeedOutput : i % 4 ? "1 1 1 1 1 1 1 1\n" : "2 2 2 2 2 2 2 2\n");
    EXPECT_EQ(load.hits + load.misses, 50) << load.result.err;
    EXPECT_EQ(load.deleted, 0) << load.result.err;
  }
  const auto files = entries();
  EXPECT_EQ(files.size(), 3u);
  for (const auto &file : files) EXPECT_EQ(file.problem, "") << file.path;
}

TEST_F(DiskCacheE2E, ProcessesKilledWhileBuildingLeaveEntriesThatVerify) {
  std::mt19937 random(7);
  for (int round = 0; round < 6; ++round) {
    llvm::cantFail(store::DiskCache(dir_, ~uint64_t(0)).clear());
    Child child(probeCommand(1, "AppKernel", {"lib.spv", "app.spv"}));
    // A cold load takes about half a second here: the kill lands anywhere in it.
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + random() % 900));
    child.kill(SIGKILL);
    child.wait();
    for (const auto &file : entries()) EXPECT_EQ(file.problem, "") << "round " << round << ": " << file.path;
  }
  Load after = seed();
  ASSERT_EQ(after.result.status, 0) << after.result.err;
  EXPECT_EQ(after.result.out, kSeedOutput);
  EXPECT_EQ(after.deleted, 0);
  EXPECT_EQ(after.waits, 0) << "a killed builder's lock is free: " << after.result.err;
}

TEST_F(DiskCacheE2E, EightProcessesColdStartingTogetherBuildOnce) {
  std::vector<std::unique_ptr<Child>> children;
  for (int i = 0; i < 8; ++i)
    children.push_back(std::make_unique<Child>(probeCommand(1, "AppKernel", {"lib.spv", "app.spv"})));
  int stored = 0, hits = 0, misses = 0;
  for (int i = 0; i < 8; ++i) {
    Load load = parse(children[i]->wait());
    ASSERT_EQ(load.result.status, 0) << "process " << i << ": " << load.result.err;
    EXPECT_EQ(load.result.out, kSeedOutput);
    EXPECT_EQ(load.hits + load.misses, 1) << load.result.err;
    stored += load.stored;
    hits += load.hits;
    misses += load.misses;
  }
  EXPECT_EQ(stored, 1) << "one process builds, the others wait for its entry";
  EXPECT_EQ(misses, 1);
  EXPECT_EQ(hits, 7);
  ASSERT_EQ(entries().size(), 1u);
  EXPECT_EQ(entries()[0].problem, "");
}

// A kernel of a library DPC++ built (oneMKL's data fitting), its name longer than a file name may
// be, as most of DPC++'s are: PoCL makes a program's binary in a directory named after each
// kernel and ends the process where one does not fit, so devdl stores the SPIR it built the
// program from there, saying why; Intel's runtime gives the binary. The next process loads it.
TEST_F(DiskCacheE2E, AProgramIsStoredWhereTheDriverCannotGiveItsBinary) {
  const CommandResult listed = test::run({DEVDL_NM, DEVDL_TEST_DPCPP_LIBRARY});
  ASSERT_EQ(listed.status, 0) << listed.err;
  std::string kernel;
  for (const std::string &line : test::linesOf(listed.out))
    if (line.starts_with("K ") && line.size() - 2 > NAME_MAX) {
      kernel = line.substr(2);
      break;
    }
  ASSERT_FALSE(kernel.empty()) << "no kernel named longer than NAME_MAX in " << DEVDL_TEST_DPCPP_LIBRARY;
  const std::vector<std::string> argv = {DEVDL_TEST_CACHE_PROBE, "--look-up-only", "1", kernel,
                                         DEVDL_TEST_DPCPP_LIBRARY};
  const Load first = parse(test::run(argv));
  ASSERT_EQ(first.result.status, 0) << first.result.err;
  EXPECT_EQ(first.counts(), std::make_tuple(0, 1, 1)) << "hits, misses, stored";
  if (!std::getenv("DEVDL_TEST_INTEL_OPENCL")) {  // PoCL: its binary would end the process; the SPIR is stored
    EXPECT_NE(first.result.err.find("as SPIR: the driver makes a program's binary in a directory named after each "
                                    "kernel, and kernel `" + kernel + "` is " + std::to_string(kernel.size()) +
                                    " bytes, longer than a file name may be"),
              std::string::npos)
        << first.result.err;
  }
  const Load second = parse(test::run(argv));
  ASSERT_EQ(second.result.status, 0) << second.result.err;
  EXPECT_EQ(second.counts(), std::make_tuple(1, 0, 0)) << "hits, misses, stored";
}

// A library of 1,000 kernels: on PoCL, whose binary would compile every kernel (40 s here), the
// SPIR the program was built from is stored; on Intel's runtime, the program of parts built in
// helper processes. Either way the next process loads it and runs the application's kernel.
TEST_F(DiskCacheE2E, ALibraryOfManyKernelsIsStoredWithoutCompilingThemAll) {
  const Load first = seedWith(image("lib_kernels1000.spv")), second = seedWith(image("lib_kernels1000.spv"));
  for (const Load *load : {&first, &second}) {
    ASSERT_EQ(load->result.status, 0) << load->result.err;
    EXPECT_EQ(load->result.out, kSeedOutput);
  }
  EXPECT_EQ(first.counts(), std::make_tuple(0, 1, 1)) << "hits, misses, stored";
  EXPECT_EQ(second.counts(), std::make_tuple(1, 0, 0)) << "hits, misses, stored";
  const bool intel = std::getenv("DEVDL_TEST_INTEL_OPENCL");
  EXPECT_NE(first.result.err.find(intel ? " programs in as many helper processes"
                                        : " as SPIR: 1001 kernels, which the driver would compile every one of"),
            std::string::npos)
      << first.result.err;
  // Against the 13 MB of PoCL's binary of every kernel.
  for (const store::EntryFile &entry : entries()) {
    if (entry.description.starts_with("image summary of ")) continue;
    EXPECT_LT(entry.size, 2u << 20) << entry.description;
  }
}

// Image files' summaries (store/image_summary.h): a process that opens a large file again,
// unchanged, takes its images from the summary, and reads the file only to link it.
TEST_F(DiskCacheE2E, ALargeFileIsKnownByItsSummaryAndReadOnlyToBeLinked) {
  const std::string library = largeLibrary();
  Load cold = seedWith(library), warm = seedWith(library);
  for (const Load *load : {&cold, &warm}) {
    ASSERT_EQ(load->result.status, 0) << load->result.err;
    EXPECT_EQ(load->result.out, kSeedOutput);
  }
  EXPECT_EQ(summaries(cold), std::make_tuple(0, 1, 1)) << "used, missing, stored: " << cold.result.err;
  EXPECT_EQ(summaries(warm), std::make_tuple(1, 0, 0)) << "used, missing, stored: " << warm.result.err;
  EXPECT_EQ(warm.counts(), std::make_tuple(1, 0, 0)) << "the program: hits, misses, stored";
  // Another program of it (other build options) is linked from the file, read now.
  setenv("DEVDL_BUILD_OPTIONS", "-cl-fast-relaxed-math", 1);
  Load linked = seedWith(library);
  ASSERT_EQ(linked.result.status, 0) << linked.result.err;
  EXPECT_EQ(linked.result.out, kSeedOutput);
  EXPECT_EQ(summaries(linked), std::make_tuple(1, 0, 0));
  EXPECT_EQ(linked.counts(), std::make_tuple(0, 1, 1));
  // The summary is an entry of the cache, listed as one.
  const auto files = entries();
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(std::count_if(files.begin(), files.end(),
                          [&](const store::EntryFile &f) {
                            return f.problem.empty() && f.description == "image summary of " + library;
                          }),
            1);
}

TEST_F(DiskCacheE2E, APreloadedLargeFileIsKnownByItsSummaryToo) {
  const std::string library = largeLibrary();
  setenv("DEVDL_PRELOAD", library.c_str(), 1);
  const Load cold = parse(test::run(probeCommand(1, "AppKernel", {"app.spv"})));
  const Load warm = parse(test::run(probeCommand(1, "AppKernel", {"app.spv"})));
  unsetenv("DEVDL_PRELOAD");
  for (const Load *load : {&cold, &warm}) {
    ASSERT_EQ(load->result.status, 0) << load->result.err;
    EXPECT_EQ(load->result.out, kSeedOutput);
  }
  EXPECT_EQ(summaries(cold), std::make_tuple(0, 1, 1)) << cold.result.err;
  EXPECT_EQ(summaries(warm), std::make_tuple(1, 0, 0)) << warm.result.err;
}

TEST_F(DiskCacheE2E, ADamagedSummaryIsDeletedAndTheFileRead) {
  const std::string library = largeLibrary();
  ASSERT_EQ(summaries(seedWith(library)), std::make_tuple(0, 1, 1));
  std::string path;
  for (const store::EntryFile &file : entries())
    if (file.description == "image summary of " + library) path = file.path;
  ASSERT_FALSE(path.empty());
  std::string bytes = test::readFile(path);
  bytes[store::Entry::kHeaderSize + 20] ^= 0x01;  // in the first image's hash
  test::writeFile(path, bytes);
  chmod(path.c_str(), 0600);
  const Load damaged = seedWith(library);
  ASSERT_EQ(damaged.result.status, 0) << damaged.result.err;
  EXPECT_EQ(damaged.result.out, kSeedOutput);
  EXPECT_EQ(summaries(damaged), std::make_tuple(0, 1, 1)) << "read, and summarized again";
  EXPECT_NE(damaged.result.err.find(path + ": checksum mismatch; deleted, the image file is read"), std::string::npos)
      << damaged.result.err;
  EXPECT_EQ(damaged.hits, 1) << "the program, from the file's hash";
}

TEST_F(DiskCacheE2E, SmallAndJustChangedFilesHaveNoSummary) {
  const Load small = seed();
  ASSERT_EQ(small.result.status, 0) << small.result.err;
  EXPECT_EQ(summaries(small), std::make_tuple(0, 0, 0)) << "lib.spv and app.spv are read: " << small.result.err;
  // A file written in place, its modification time set back: its change time says it changed.
  const std::string library = largeLibrary();
  ASSERT_EQ(summaries(seedWith(library)), std::make_tuple(0, 1, 1));
  struct stat before;
  ASSERT_EQ(stat(library.c_str(), &before), 0);
  test::writeFile(library, test::readFile(library));
  const struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(utimensat(AT_FDCWD, library.c_str(), times, 0), 0);
  const Load changed = seedWith(library);
  ASSERT_EQ(changed.result.status, 0) << changed.result.err;
  EXPECT_EQ(changed.result.out, kSeedOutput);
  EXPECT_EQ(summaries(changed), std::make_tuple(0, 0, 0)) << "changed just now: read, and not summarized yet";
}

TEST_F(DiskCacheE2E, AFileChangedInPlaceBetweenItsOpenAndItsLinkIsAnError) {
  const std::string library = largeLibrary();
  ASSERT_EQ(summaries(seedWith(library)), std::make_tuple(0, 1, 1));
  // Another program, so that the file is read to link it: it no longer holds what was opened.
  setenv("DEVDL_BUILD_OPTIONS", "-cl-fast-relaxed-math", 1);
  const Load flipped = seedWith(library, {"--flip-after-open", library});
  EXPECT_EQ(flipped.result.status, 1);
  EXPECT_EQ(flipped.result.out, "");
  EXPECT_NE(flipped.result.err.find(library + ": image 0 (spirv): the file changed since it was opened"),
            std::string::npos)
      << flipped.result.err;
  EXPECT_EQ(std::get<2>(flipped.counts()), 0) << "nothing stored";
}

TEST_F(DiskCacheE2E, AFileReplacedBetweenItsOpenAndItsLinkIsLinkedAsOpened) {
  const std::string library = largeLibrary();
  const std::string original = test::readFile(library);
  ASSERT_EQ(summaries(seedWith(library)), std::make_tuple(0, 1, 1));
  // Renamed over, as builds and package managers replace files: the file opened is still there.
  setenv("DEVDL_BUILD_OPTIONS", "-cl-fast-relaxed-math", 1);
  const Load replaced = seedWith(library, {"--replace-after-open", library});
  ASSERT_EQ(replaced.result.status, 0) << replaced.result.err;
  EXPECT_EQ(replaced.result.out, kSeedOutput);
  EXPECT_EQ(summaries(replaced), std::make_tuple(1, 0, 0));
  EXPECT_NE(test::readFile(library), original) << "the probe replaced it";
}

TEST_F(DiskCacheE2E, WithoutTheCacheAFileChangedAfterItsOpenIsLinkedAsOpened) {
  const std::string library = largeLibrary();
  setenv("DEVDL_CACHE", "0", 1);
  const Load flipped = seedWith(library, {"--flip-after-open", library});
  ASSERT_EQ(flipped.result.status, 0) << flipped.result.err;
  EXPECT_EQ(flipped.result.out, kSeedOutput) << "its bytes were read when it was opened";
  EXPECT_EQ(summaries(flipped), std::make_tuple(0, 0, 0));
}

TEST_F(DiskCacheE2E, AnUnwritableCacheDirectoryStillLoads) {
  setenv("DEVDL_CACHE_DIR", "/proc/self/fdinfo", 1);  // no file can be created there, even by root
  Load load = seed();
  ASSERT_EQ(load.result.status, 0) << load.result.err;
  EXPECT_EQ(load.result.out, kSeedOutput);
  EXPECT_EQ(load.stored, 0);
  EXPECT_NE(load.result.err.find("nothing more is stored by this process"), std::string::npos) << load.result.err;
}

TEST_F(DiskCacheE2E, TurnedOffItWritesNothing) {
  setenv("DEVDL_CACHE", "0", 1);
  Load load = seed();
  ASSERT_EQ(load.result.status, 0) << load.result.err;
  EXPECT_EQ(load.result.out, kSeedOutput);
  EXPECT_NE(load.result.err.find("cache: none (DEVDL_CACHE=0)"), std::string::npos) << load.result.err;
  EXPECT_NE(access(dir_.c_str(), F_OK), 0);
}

TEST_F(DiskCacheE2E, DefaultDirectoryIsUnderXdgCacheHome) {
  unsetenv("DEVDL_CACHE_DIR");
  const std::string xdg = test::scratchDir() + "/xdg";
  setenv("XDG_CACHE_HOME", xdg.c_str(), 1);
  ASSERT_EQ(seed().stored, 1);
  struct stat st{};
  ASSERT_EQ(stat((xdg + "/devdl").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(llvm::cantFail(store::DiskCache(xdg + "/devdl", ~uint64_t(0)).list()).size(), 1u);
}

}  // namespace
}  // namespace devdl
