// A helper program devdl runs for work that may end its process (the SPIRV-LLVM-Translator):
// started with posix_spawn (no fork of a large process: an MPI rank's registered memory), its
// signals at their defaults and nothing of the host's changed, no descriptor of the host's but
// the channel, and everything bounded by one deadline. The channel is a socket that is the
// helper's standard input and output: a helper that dies while devdl writes is an error, not a
// SIGPIPE. What the helper writes to its standard error is kept, its last lines naming why it
// failed.
#pragma once

#include <llvm/Support/Error.h>

#include <chrono>
#include <string>
#include <string_view>
#include <sys/types.h>

namespace devdl {

class HelperProcess {
 public:
  using Clock = std::chrono::steady_clock;

  /// Starts `path` with no arguments (its name as argv[0]) and this process's environment; every
  /// exchange with it must be over within `timeout` of now. `what` names the helper in errors.
  static llvm::Expected<HelperProcess> start(const std::string &path, std::string what,
                                             std::chrono::milliseconds timeout);

  HelperProcess(HelperProcess &&other) noexcept;
  HelperProcess &operator=(HelperProcess &&) = delete;
  ~HelperProcess();  // a helper still running is killed and reaped

  /// Writes all of `bytes` to the helper. Fails where it ends or stops reading, or at the deadline.
  llvm::Error send(std::string_view bytes);

  /// Reads exactly `size` bytes from the helper. Fails where it ends first (saying how it ended,
  /// and what it last wrote to its standard error), or at the deadline.
  llvm::Expected<std::string> receive(size_t size);

  /// Ends the exchange: closes the channel and waits, until the deadline, for the helper to exit.
  /// Fails where it exits other than with 0.
  llvm::Error finish();

 private:
  HelperProcess(pid_t pid, int channel, int errors, std::string what, std::chrono::milliseconds timeout)
      : pid_(pid), channel_(channel), errors_(errors), what_(std::move(what)), timeout_(timeout),
        deadline_(Clock::now() + timeout) {}

  // Waits until the channel can be read (or written) or standard error has something, keeping
  // what standard error says. False at the deadline.
  bool wait(bool forWriting);
  void readErrors();
  // Reaps the helper, killing it where it has not exited by the deadline.
  void reap();
  // Why the exchange ended early: the helper's end, reaped (or killed at the deadline), and its
  // last words.
  llvm::Error ended();
  llvm::Error timedOut();
  std::string lastWords() const;
  void closeChannel();

  pid_t pid_;
  int channel_, errors_;
  std::string what_;
  std::chrono::milliseconds timeout_;
  Clock::time_point deadline_;
  std::string stderr_;  // the last bytes the helper wrote there
  int status_ = -1;     // its wait status once reaped (-1: reaped by another, as where SIGCHLD is ignored)
  bool killed_ = false;  // by devdl, at the deadline
};

}  // namespace devdl
