// A helper program devdl runs for work that may end its process (the SPIRV-LLVM-Translator):
// started with posix_spawn (no fork of a large process: an MPI rank's registered memory), its
// signals at their defaults and nothing of the host's changed, no descriptor of the host's but
// the channel, and each exchange with it bounded by a deadline. The channel is a socket that is
// the helper's standard input and output: a helper that dies while devdl writes is an error, not
// a SIGPIPE. What the helper writes to its standard error is kept, its last line naming why it
// failed. The helper runs in a process group of its own, which is ended with it (a wrapper
// script's children too), and its exit ends a wait at once, whoever holds the channel. A helper
// may serve one exchange after another (beginExchange); one that outlives its host sees its
// channel close, and ends.
#pragma once

#include <llvm/Support/Error.h>

#include <chrono>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace devdl {

/// What a helper writes to its standard error, read from its pipe as it comes: the last bytes
/// kept, whose last line names why it failed.
class HelperStderr {
 public:
  explicit HelperStderr(int fd) : fd_(fd) {}
  HelperStderr(HelperStderr &&other) noexcept;
  HelperStderr &operator=(HelperStderr &&) = delete;
  ~HelperStderr();

  /// The pipe; -1 once the helper's end of it closed.
  int fd() const { return fd_; }
  /// Forgets what it said before: its last words are those of the next exchange.
  void clear() { kept_.clear(); }
  /// Reads what the pipe holds now.
  void read();
  /// Reads what is left in the pipe once the helper has ended.
  void drain();
  /// "; it said: " and its last line, or "" where it said nothing.
  std::string lastWords() const;

 private:
  int fd_;
  std::string kept_;  // the last bytes the helper wrote there
};

/// The helper's process: its id, the process group it leads, its process descriptor, and how it
/// ended once reaped.
class HelperChild {
 public:
  using Clock = std::chrono::steady_clock;

  /// `exit`: its process descriptor (pidfd), readable once it exits; -1 where the kernel has none.
  HelperChild(pid_t pid, int exit);
  HelperChild(HelperChild &&other) noexcept;
  HelperChild &operator=(HelperChild &&) = delete;
  /// A helper still running is killed and reaped; in a child this process forked, whose helper
  /// it is not, only the descriptor is closed.
  ~HelperChild();

  /// Whether the helper was started by this process (not inherited through fork).
  bool ownedHere() const;
  /// Whether it is still to be reaped.
  bool unreaped() const { return pid_ > 0; }
  int exitFd() const { return exit_; }
  /// Whether the helper has exited (reaped or not).
  bool exited();
  /// Kills the helper's process group: itself and whatever it started.
  void endGroup();
  /// Kills it, as its exchange went past the deadline.
  void killAtDeadline();
  /// Reaps the helper, killing it where it has not exited by `deadline`, and its group; reads
  /// what it says on `errors` meanwhile.
  void reap(Clock::time_point deadline, HelperStderr &errors);
  /// Whether, reaped, it exited with status 0 (or was reaped by another: its answer is judged).
  bool succeeded() const;
  /// How it ended, reaped; `timeout` the exchange's.
  std::string howEnded(std::chrono::milliseconds timeout) const;

 private:
  pid_t pid_;
  pid_t owner_;  // the process that started it
  int exit_;
  int status_ = -1;      // its wait status once reaped (-1: reaped by another, as where SIGCHLD is ignored)
  bool killed_ = false;  // by devdl, at the deadline
};

class HelperProcess {
 public:
  using Clock = HelperChild::Clock;

  /// Starts `path` with `arguments` (its name as argv[0]) and this process's environment. `what`
  /// names the helper in errors.
  static llvm::Expected<HelperProcess> start(const std::string &path, std::string what,
                                             const std::vector<std::string> &arguments = {});

  HelperProcess(HelperProcess &&other) noexcept;
  HelperProcess &operator=(HelperProcess &&) = delete;
  /// A helper still running is killed and reaped; in a child this process forked, whose helper
  /// it is not, only this process's descriptors are closed.
  ~HelperProcess();

  const std::string &path() const { return path_; }
  /// Whether the helper was started by this process (not inherited through fork).
  bool ownedHere() const { return child_.ownedHere(); }
  /// Whether a helper between exchanges is still there to take one: it has neither ended nor
  /// written anything unasked.
  bool idleAndAlive();

  /// Begins an exchange: everything until the next beginExchange must be over within `timeout`.
  void beginExchange(std::chrono::milliseconds timeout);
  /// How many exchanges it has begun.
  unsigned exchanges() const { return exchanges_; }

  /// Writes all of `bytes` to the helper; where it has ended, what is left is dropped, and the
  /// next receive reads what it wrote before and says how it ended. Fails at the deadline.
  llvm::Error send(std::string_view bytes);

  /// Reads exactly `size` bytes from the helper, holding memory as they arrive. Fails where it
  /// ends first (saying how it ended, and what it last wrote to its standard error), or at the
  /// deadline.
  llvm::Expected<std::string> receive(size_t size);

  /// Reads all the helper writes until it exits: a command that writes its answer and ends. Fails
  /// where it exits with another status than 0 or is killed (saying how, and what it last wrote
  /// to its standard error), at the deadline, or once it wrote more than `limit` bytes (killed
  /// then: what an answer can be, not all a runaway command writes, is held).
  llvm::Expected<std::string> receiveUntilExit(size_t limit);

 private:
  HelperProcess(pid_t pid, int channel, int errors, int exit, std::string path, std::string what);

  enum class Waited { Ready, Exited, Deadline };
  // Waits until the channel can be read (or written), keeping what standard error says
  // meanwhile; or until the helper exits, or the deadline.
  Waited wait(bool forWriting);
  // Why the exchange ended early: the helper's end, reaped (or killed at the deadline), and its
  // last words.
  llvm::Error ended();
  llvm::Error timedOut();
  void closeChannel();

  // Destroyed in reverse: the helper killed and reaped, then its standard error closed.
  HelperStderr stderr_;
  HelperChild child_;
  int channel_;
  std::string path_, what_;
  std::chrono::milliseconds timeout_{0};
  Clock::time_point deadline_;
  unsigned exchanges_ = 0;
};

}  // namespace devdl
