// The translator in a helper process (backend/spirv/translator_process.h): a helper that dies,
// hangs, writes garbage or nothing is an error saying so, this process goes on, and the next
// translation works. The misbehaving helpers are shell scripts, named by DEVDL_TRANSLATOR.
#include "backend/spirv/translation.h"
#include "backend/spirv/translator_process.h"
#include "test_support.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace devdl::test {
namespace {

class TranslatorProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!backend::hasTranslatorHelper()) GTEST_SKIP() << "this build has no SPIR-V translator to run in a helper";
    const char *named = std::getenv("DEVDL_TRANSLATOR");
    real_ = named ? named : "";
    const std::string bytes = readFile(image("lib.spv"));
    words_.resize(bytes.size() / 4);
    std::memcpy(words_.data(), bytes.data(), words_.size() * 4);
  }
  void TearDown() override {
    setenv("DEVDL_TRANSLATOR", real_.c_str(), 1);
    unsetenv("DEVDL_TRANSLATOR_TIMEOUT");
  }

  // A helper that runs `script` (sh), named by DEVDL_TRANSLATOR from now on: a file of its own
  // (one that ran before may still be reading its own).
  std::string useHelper(const std::string &script) {
    if (dir_.empty()) dir_ = scratchDir();
    const std::string path = dir_ + "/helper-" + std::to_string(++helpers_);
    writeFile(path, "#!/bin/sh\n" + script + "\n");
    EXPECT_EQ(chmod(path.c_str(), 0755), 0);
    setenv("DEVDL_TRANSLATOR", path.c_str(), 1);
    return path;
  }

  // The real helper again: what it makes of the module, which must be SPIR.
  void expectTheNextTranslationWorks() {
    setenv("DEVDL_TRANSLATOR", real_.c_str(), 1);
    auto spir = backend::spirvToSpir(words_);
    ASSERT_TRUE(!!spir) << errorText(spir);
    EXPECT_EQ(spir->compare(0, 4, "BC\xc0\xde"), 0);
  }

  std::string real_, dir_;
  int helpers_ = 0;
  std::vector<uint32_t> words_;  // lib.spv
};

TEST_F(TranslatorProcess, AHelperThatSegfaultsIsAnErrorSayingHowItEndedAndWhatItSaid) {
  const std::string helper = useHelper("echo 'translating, and then...' >&2; kill -SEGV $$");
  auto spir = backend::spirvToSpir(words_);
  ASSERT_FALSE(spir);
  EXPECT_EQ(errorText(spir), "the SPIR-V translator (" + helper +
                                 ") was killed by signal 11 (Segmentation fault); "
                                 "it said: translating, and then...");
  expectTheNextTranslationWorks();
}

TEST_F(TranslatorProcess, AHelperThatHangsIsKilledAtTheBound) {
  const std::string helper = useHelper("exec sleep 60");
  setenv("DEVDL_TRANSLATOR_TIMEOUT", "0.3", 1);
  auto optimized = backend::optimizeSpirv(words_);
  ASSERT_FALSE(optimized);
  EXPECT_EQ(errorText(optimized), "the SPIR-V translator (" + helper + ") did not finish within 0.300 s and was killed");
  expectTheNextTranslationWorks();
}

TEST_F(TranslatorProcess, AHelperThatWritesGarbageIsNotTheExpectedOutput) {
  const std::string helper = useHelper("printf 'garbage, and more of it'");
  EXPECT_EQ(errorText(backend::spirvToSpir(words_)),
            "the SPIR-V translator (" + helper + ") wrote not the expected output: a message of no kind devdl knows");
  // A result of the right kind (its header "dtvS", 5 bytes) that is not bitcode.
  const std::string hello = useHelper(R"(printf 'dtvS\005\000\000\000\000\000\000\000hello')");
  EXPECT_EQ(errorText(backend::spirvToSpir(words_)),
            "the SPIR-V translator (" + hello + ") wrote not the expected output: no bitcode");
  // Nor SPIR-V, where SPIR-V is the result.
  const std::string notSpirv = errorText(backend::optimizeSpirv(words_));
  EXPECT_NE(notSpirv.find("the optimized module written as SPIR-V is invalid"), std::string::npos) << notSpirv;
  // A layout where none was asked for.
  const std::string layout = useHelper(R"(printf 'dtvL\000\000\000\000\000\000\000\000')");
  EXPECT_EQ(errorText(backend::spirvToSpir(words_)),
            "the SPIR-V translator (" + layout + ") wrote not the expected output: a layout unasked");
  expectTheNextTranslationWorks();
}

TEST_F(TranslatorProcess, AHelperThatExitsWithNothingWrittenIsAnError) {
  const std::string helper = useHelper("exit 0");
  EXPECT_EQ(errorText(backend::spirvToSpir(words_)),
            "the SPIR-V translator (" + helper + ") exited without writing all it should");
  // A module larger than the channel holds: devdl is still writing when the helper is gone, and
  // this process takes no SIGPIPE for it.
  std::vector<uint32_t> large(words_);
  large.resize(4 << 20);
  EXPECT_EQ(errorText(backend::spirvToSpir(large)),
            "the SPIR-V translator (" + helper + ") exited without writing all it should");
  expectTheNextTranslationWorks();
}

TEST_F(TranslatorProcess, AHelperThatExitsWithAnErrorIsAnErrorSayingWhatItSaid) {
  const std::string helper = useHelper("echo 'no module for me' >&2; exit 3");
  EXPECT_EQ(errorText(backend::spirvToSpir(words_)),
            "the SPIR-V translator (" + helper + ") exited with status 3; it said: no module for me");
  expectTheNextTranslationWorks();
}

// Whether process `pid` (not this one's child) has ended, waiting up to two seconds for it: gone,
// or a zombie its new parent has not reaped yet.
bool ended(pid_t pid) {
  for (int i = 0; i < 200; ++i) {
    if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
    const std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
    if (const size_t name = stat.rfind(')'); name != std::string::npos && stat.compare(name, 3, ") Z") == 0) return true;
    usleep(10000);
  }
  return false;
}

// A wrapper that exits leaving a child that holds the channel: its exit ends the wait at once,
// with its status, and the child goes with its process group.
TEST_F(TranslatorProcess, AHelperThatExitsWhileItsChildHoldsTheChannelEndsTheWaitAtOnce) {
  if (dir_.empty()) dir_ = scratchDir();
  const std::string child = dir_ + "/child";
  const std::string helper = useHelper("sleep 30 & echo $! > " + child + "; echo 'left a child' >&2; exit 3");
  setenv("DEVDL_TRANSLATOR_TIMEOUT", "20", 1);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(errorText(backend::spirvToSpir(words_)),
            "the SPIR-V translator (" + helper + ") exited with status 3; it said: left a child");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15)) << "not the 20 s bound";
  const pid_t pid = std::stoi(readFile(child));
  EXPECT_TRUE(ended(pid)) << "the helper's child " << pid << " is still running";
  expectTheNextTranslationWorks();
}

// At the bound, the helper's whole process group is killed: a wrapper's child too.
TEST_F(TranslatorProcess, AHelperKilledAtTheBoundTakesItsChildrenWithIt) {
  if (dir_.empty()) dir_ = scratchDir();
  const std::string child = dir_ + "/child";
  const std::string helper = useHelper("sleep 60 & echo $! > " + child + "; sleep 60");
  setenv("DEVDL_TRANSLATOR_TIMEOUT", "0.5", 1);
  EXPECT_EQ(errorText(backend::spirvToSpir(words_)),
            "the SPIR-V translator (" + helper + ") did not finish within 0.500 s and was killed");
  const pid_t pid = std::stoi(readFile(child));
  EXPECT_TRUE(ended(pid)) << "the helper's child " << pid << " is still running";
  expectTheNextTranslationWorks();
}

// A header that claims a gigabyte is no gigabyte held: memory follows what arrives.
TEST_F(TranslatorProcess, AHeaderClaimingAGigabyteHoldsNoGigabyte) {
  const std::string helper = useHelper(R"(printf 'dtvS\000\000\000\100\000\000\000\000partial')");
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  EXPECT_EQ(errorText(backend::spirvToSpir(words_)),
            "the SPIR-V translator (" + helper + ") exited without writing all it should");
  getrusage(RUSAGE_SELF, &after);
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 256 * 1024) << "KiB more at the peak";
  expectTheNextTranslationWorks();
}

TEST_F(TranslatorProcess, AHelperThatIsMissingIsNamed) {
  const std::string missing = scratchDir() + "/no-such-helper";
  setenv("DEVDL_TRANSLATOR", missing.c_str(), 1);
  EXPECT_EQ(errorText(backend::spirvToSpir(words_)),
            "cannot start the SPIR-V translator (" + missing + "): No such file or directory");
  expectTheNextTranslationWorks();
}

// The helper has no descriptor of this process's but its channel and standard error, and its
// signals are at their defaults whatever this process set for itself: here SIGTERM ignored,
// which a child would otherwise inherit.
TEST_F(TranslatorProcess, TheHelperHasNoDescriptorOfTheHostsAndItsSignalsAtTheirDefaults) {
  const int open = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC, as careless code opens files
  ASSERT_GE(open, 0);
  ASSERT_EQ(dup2(open, 200), 200);
  ::close(open);
  struct sigaction ignore {}, before {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGTERM, &ignore, &before), 0);
  const std::string helper = useHelper(
      "for fd in 200 3 4 5 6; do [ -e /proc/$$/fd/$fd ] && [ \"$(readlink /proc/$$/fd/$fd)\" = /dev/null ] && "
      "{ echo \"descriptor $fd of the host's\" >&2; exit 4; }; done\n"
      "echo 'none of the host descriptors' >&2\n"
      "kill -TERM $$\n"
      "echo 'SIGTERM ignored' >&2; exit 5");
  const std::string said = errorText(backend::spirvToSpir(words_));
  sigaction(SIGTERM, &before, nullptr);
  ::close(200);
  EXPECT_EQ(said, "the SPIR-V translator (" + helper +
                      ") was killed by signal 15 (Terminated); it said: none of the host "
                      "descriptors");
}

// The refusals a helper makes reach this process as the same errors, of the same codes, as
// where the translation ran here (translator_limits_test.cpp checks their texts).
TEST_F(TranslatorProcess, ARefusalInTheHelperKeepsItsCode) {
  const std::string bytes = readFile(image("translator_limits_alignment_of_a_variable.spv"));
  std::vector<uint32_t> refused(bytes.size() / 4);
  std::memcpy(refused.data(), bytes.data(), refused.size() * 4);
  auto spir = backend::spirvToSpir(refused);
  ASSERT_FALSE(spir);
  llvm::Error err = spir.takeError();
  EXPECT_TRUE(hasCode(err, ErrorCode::Unsupported));
  EXPECT_EQ(llvm::toString(std::move(err)), "linked SPIR-V: alignment 12, not a power of 2 (opcode 71)");
}

// Starting a helper costs more than the seed's translation: one serves translation after
// translation. A wrapper of the real one writes each start's process id.
class TranslatorProcessKept : public TranslatorProcess {
 protected:
  void SetUp() override {
    TranslatorProcess::SetUp();
    if (IsSkipped()) return;
    dir_ = scratchDir();
    starts_ = dir_ + "/starts";
    useHelper("echo $$ >> '" + starts_ + "'\nexec '" + real_ + "'");
  }
  std::vector<pid_t> starts() const {
    std::vector<pid_t> pids;
    std::istringstream in(readFile(starts_));
    for (pid_t pid; in >> pid;) pids.push_back(pid);
    return pids;
  }
  void expectTranslated() {
    auto spir = backend::spirvToSpir(words_);
    ASSERT_TRUE(!!spir) << errorText(spir);
    EXPECT_EQ(spir->compare(0, 4, "BC\xc0\xde"), 0);
  }
  std::string starts_;
};

TEST_F(TranslatorProcessKept, OneHelperServesTranslationAfterTranslation) {
  for (int i = 0; i < 3; ++i) expectTranslated();
  auto optimized = backend::optimizeSpirv(words_);
  EXPECT_TRUE(!!optimized) << errorText(optimized);
  EXPECT_EQ(starts().size(), 1u);
}

TEST_F(TranslatorProcessKept, AHelperThatEndedBetweenTranslationsIsReplaced) {
  expectTranslated();
  ASSERT_EQ(starts().size(), 1u);
  ASSERT_EQ(kill(starts()[0], SIGKILL), 0);
  expectTranslated();
  EXPECT_EQ(starts().size(), 2u);
}

// A process forked from one with a helper kept starts its own: the kept one is its parent's,
// which goes on using it.
TEST_F(TranslatorProcessKept, AForkedChildStartsAHelperOfItsOwn) {
  expectTranslated();
  ASSERT_EQ(starts().size(), 1u);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto spir = backend::spirvToSpir(words_);
    _exit(spir && spir->compare(0, 4, "BC\xc0\xde") == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child's translation";
  expectTranslated();
  const std::vector<pid_t> pids = starts();
  ASSERT_EQ(pids.size(), 2u) << "the parent's, then the child's";
  EXPECT_EQ(kill(pids[0], 0), 0) << "the parent's still serves it";
}

// A program that links libdevdl finds the helper beside the library (where DEVDL_TRANSLATOR names
// none): the build puts it where the installation does.
TEST_F(TranslatorProcess, TheHelperIsBesideTheLibrary) {
  EXPECT_EQ(std::string(DEVDL_TEST_TRANSLATOR).substr(std::string(DEVDL_TEST_TRANSLATOR).size() -
                                                      std::string(backend::kTranslatorBesideLibrary).size()),
            backend::kTranslatorBesideLibrary);
  unsetenv("DEVDL_TRANSLATOR");
  // This test program holds devdl itself: the helper is looked for beside it.
  const std::string path = backend::translatorPath();
  EXPECT_EQ(path.substr(path.size() - std::string(backend::kTranslatorBesideLibrary).size()),
            backend::kTranslatorBesideLibrary);
  EXPECT_EQ(path.find('/'), 0u) << "a full path: " << path;
}

}  // namespace
}  // namespace devdl::test
