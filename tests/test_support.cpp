#include "test_support.h"

#include "bundle/offload_binary.h"
#include "image/read_image.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

extern char **environ;

namespace devdl::test {

std::string scratchDir() {
  const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
  const char *moved = std::getenv("DEVDL_TEST_SCRATCH");
  std::string dir = std::string(moved && *moved ? moved : DEVDL_TEST_SCRATCH) + "/" + info->test_suite_name() + "." +
                    info->name();
  // ctest runs the end-to-end suite on Level Zero too (LevelZero.*), through the OpenCL test layer
  // (OpenClVariablePointers.*) and on Intel's OpenCL runtime (IntelOpenCl.*), beside the same
  // tests on OpenCL, at once: each run its own folder (two runs in one, the first to finish
  // deleted the other's disk cache, or both built into it).
  if (const char *variant = std::getenv("DEVDL_TEST_LEVEL_ZERO")) dir += ".level_zero" + std::string(variant);
  if (std::getenv("DEVDL_TEST_OPENCL_LAYER")) dir += ".opencl_layer";
  if (std::getenv("DEVDL_TEST_INTEL_OPENCL")) dir += ".intel_opencl";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void writeNeedingBundle(const std::string &path, const std::string &source, const std::string &needed,
                        const std::string &runPath) {
  auto file = readImageFile(source);
  ASSERT_TRUE(!!file) << llvm::toString(file.takeError());
  for (DeviceImage &image : file->images) {
    if (!needed.empty()) image.setProperty(kModuleSet, "needed", PropertyType::String, needed);
    if (!runPath.empty()) image.setProperty(kModuleSet, "runpath", PropertyType::String, runPath);
  }
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  writeFile(path, packImages(file->images));
}

std::string bundleWithAnUnreadableImage() {
  const std::string lib = readFile(image("lib.spv")), app = readFile(image("app.spv"));
  const std::string garbage = lib.substr(0, 20) + std::string(64, 'Z');
  std::vector<bundle::Entry> entries(3);
  entries[0].image = asBytes(lib);
  entries[1].image = asBytes(garbage);
  entries[2].image = asBytes(app);
  std::string bytes;
  bundle::writeBundle(entries, bytes);
  return bytes;
}

ErrorCode errorCode(llvm::Error err) {
  ErrorCode code = ErrorCode::InvalidArgument;
  bool found = false;
  llvm::handleAllErrors(std::move(err), [&](const Failure &f) {
    if (!found) code = f.code();
    found = true;
  });
  EXPECT_TRUE(found) << "expected a devdl::Failure";
  return code;
}

std::vector<std::string> symbolLines(const DeviceImage &image) {
  std::vector<std::string> lines;
  for (const Symbol &s : image.symbols) lines.push_back(std::string(1, symbolLetter(s)) + " " + std::string(s.name));
  std::sort(lines.begin(), lines.end());
  return lines;
}

namespace {

std::string slurp(int fd) {
  std::string data;
  lseek(fd, 0, SEEK_SET);
  char buffer[65536];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof buffer)) > 0) data.append(buffer, static_cast<size_t>(n));
  return data;
}

}  // namespace

Child::Child(const std::vector<std::string> &argv) {
  // Output goes to unlinked temporary files: no pipe can fill up and block the child.
  char outPath[] = "/tmp/devdl-test-out-XXXXXX", errPath[] = "/tmp/devdl-test-err-XXXXXX";
  outFd_ = mkstemp(outPath);
  errFd_ = mkstemp(errPath);
  unlink(outPath);
  unlink(errPath);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, outFd_, 1);
  posix_spawn_file_actions_adddup2(&actions, errFd_, 2);
  std::vector<char *> args;
  for (const std::string &a : argv) args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0) {
    ADD_FAILURE() << "cannot run " << argv[0];
    pid_ = -1;
  }
  posix_spawn_file_actions_destroy(&actions);
}

Child::~Child() {
  if (pid_ > 0) wait();
  close(outFd_);
  close(errFd_);
}

void Child::kill(int signal) {
  if (pid_ > 0) ::kill(pid_, signal);
}

CommandResult Child::wait() {
  CommandResult result;
  if (pid_ > 0) {
    int status = 0;
    waitpid(pid_, &status, 0);
    result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    pid_ = -1;
  }
  result.out = slurp(outFd_);
  result.err = slurp(errFd_);
  return result;
}

CommandResult run(const std::vector<std::string> &argv) { return Child(argv).wait(); }

std::vector<std::string> linesOf(const std::string &text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

}  // namespace devdl::test
