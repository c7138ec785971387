// Shared by the tests: where the test images are, reading files, running the tools.
#pragma once

#include "test_basics.h"
#include "image/device_image.h"
#include "test_images.h"
#include "support/error.h"

#include <gtest/gtest.h>
#include <llvm/Support/Error.h>

#include <algorithm>
#include <sys/types.h>
#include <string>
#include <vector>

namespace devdl::test {

/// A fresh directory for one test's files, under DEVDL_TEST_SCRATCH where that variable is set.
std::string scratchDir();

/// Writes at `path` (its directories made) a bundle of the images of the file `source` recording
/// the files they need and their run path, as devdl-pack --needed NEEDED --runpath RUNPATH does.
void writeNeedingBundle(const std::string &path, const std::string &source, const std::string &needed,
                        const std::string &runPath = "");

/// A bundle of three images whose middle one cannot be read (lib.spv's header and then garbage,
/// in an envelope of LLVM's, read from its bytes): lib.spv's, that one, then app.spv's.
std::string bundleWithAnUnreadableImage();

/// The message of a failed Expected, consuming it; "" when it succeeded.
template <typename T>
std::string errorText(llvm::Expected<T> &value) {
  return value ? std::string() : llvm::toString(value.takeError());
}
template <typename T>
std::string errorText(llvm::Expected<T> &&value) {
  return errorText(value);
}

/// The code of the first Failure in `err`, consuming it.
ErrorCode errorCode(llvm::Error err);

/// "K name" lines of an image's symbols, sorted: what devdl-nm prints.
std::vector<std::string> symbolLines(const DeviceImage &image);

struct CommandResult {
  int status = -1;  // exit status, or -1 if it did not exit normally (a crash)
  std::string out, err;
};

/// argv[0] started with the arguments, without a shell, stdout and stderr captured; waited
/// for at the latest when destroyed.
class Child {
 public:
  explicit Child(const std::vector<std::string> &argv);
  ~Child();
  Child(const Child &) = delete;
  Child &operator=(const Child &) = delete;
  void kill(int signal);
  /// Waits for the exit and gives what it printed (status -1 when it did not exit normally).
  CommandResult wait();

 private:
  pid_t pid_ = -1;
  int outFd_ = -1, errFd_ = -1;
};

/// Runs argv[0] with the arguments, without a shell, capturing stdout and stderr.
CommandResult run(const std::vector<std::string> &argv);

/// The lines of `text` that are not empty.
std::vector<std::string> linesOf(const std::string &text);

inline bool contains(const std::vector<std::string> &lines, const std::string &line) {
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

}  // namespace devdl::test
