// A helper program devdl runs (support/helper_process.h): posix_spawn, one socket for its
// standard input and output, a pipe for its standard error, and poll bounded by one deadline.
#include "support/helper_process.h"
#include "support/error.h"

#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char **environ;

namespace devdl {
namespace {

constexpr size_t kStderrKept = 4096;  // of what the helper writes to standard error, the last bytes
// What a receive holds before the bytes arrive: a header's size claim is the helper's word.
constexpr size_t kReceiveChunk = size_t(1) << 20;
// Where the kernel gives no process descriptor (before Linux 5.3), how often a wait looks whether
// the helper has exited.
constexpr int kExitPollMs = 50;

void closeFd(int &fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// `fd` moved above the standard descriptors, so that dup2 onto 0, 1 and 2 in the helper cannot
// overwrite one of its fellows (where the host has closed its own standard descriptors).
int aboveStandard(int fd) {
  if (fd > 2) return fd;
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  ::close(fd);
  return moved;
}

struct SpawnSettings {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  SpawnSettings() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attributes);
  }
  ~SpawnSettings() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
  }
};

std::string seconds(std::chrono::milliseconds time) {
  const auto ms = time.count();
  return ms % 1000 ? std::to_string(ms / 1000) + "." + std::to_string(ms % 1000 + 1000).substr(1) + " s"
                   : std::to_string(ms / 1000) + " s";
}

}  // namespace

llvm::Expected<HelperProcess> HelperProcess::start(const std::string &path, std::string what,
                                                   const std::vector<std::string> &arguments) {
  int channel[2], errors[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, channel) != 0)
    return fail(ErrorCode::Io, "cannot start " + what + ": socketpair: " + std::strerror(errno));
  if (pipe2(errors, O_CLOEXEC) != 0) {
    const int error = errno;
    ::close(channel[0]);
    ::close(channel[1]);
    return fail(ErrorCode::Io, "cannot start " + what + ": pipe: " + std::strerror(error));
  }
  for (int *fd : {&channel[0], &channel[1], &errors[0], &errors[1]}) *fd = aboveStandard(*fd);
  SpawnSettings settings;
  // The channel as standard input and output, the pipe as standard error; nothing else of ours
  // (descriptors opened without O_CLOEXEC by the program or its libraries included).
  posix_spawn_file_actions_adddup2(&settings.actions, channel[1], 0);
  posix_spawn_file_actions_adddup2(&settings.actions, channel[1], 1);
  posix_spawn_file_actions_adddup2(&settings.actions, errors[1], 2);
  posix_spawn_file_actions_addclosefrom_np(&settings.actions, 3);
  // Every signal at its default and none blocked in the helper, whatever the host set for itself:
  // a helper that ignored SIGSEGV or SIGPIPE as its host does would not end as it should.
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&settings.attributes, &all);
  posix_spawnattr_setsigmask(&settings.attributes, &none);
  // A process group of its own, which ends with it: a wrapper script's children too.
  posix_spawnattr_setpgroup(&settings.attributes, 0);
  posix_spawnattr_setflags(&settings.attributes, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  std::vector<std::string> words = {path};
  words.insert(words.end(), arguments.begin(), arguments.end());
  std::vector<char *> argv;
  for (std::string &word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, path.c_str(), &settings.actions, &settings.attributes, argv.data(), environ);
  ::close(channel[1]);
  ::close(errors[1]);
  if (spawned != 0 || channel[0] < 0 || errors[0] < 0) {
    ::close(channel[0]);
    ::close(errors[0]);
    return fail(spawned == ENOENT ? ErrorCode::NotFound : ErrorCode::Io,
                "cannot start " + what + ": " + std::strerror(spawned ? spawned : EMFILE));
  }
  fcntl(channel[0], F_SETFL, fcntl(channel[0], F_GETFL) | O_NONBLOCK);
  fcntl(errors[0], F_SETFL, fcntl(errors[0], F_GETFL) | O_NONBLOCK);
  // Readable once it exits, whoever else holds the channel (close-on-exec, as pidfd_open makes it).
  const int exit = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  return HelperProcess(pid, channel[0], errors[0], exit, path, std::move(what));
}

// HelperStderr: the helper's standard error.

HelperStderr::HelperStderr(HelperStderr &&other) noexcept : fd_(other.fd_), kept_(std::move(other.kept_)) {
  other.fd_ = -1;
}

HelperStderr::~HelperStderr() { closeFd(fd_); }

void HelperStderr::read() {
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::read(fd_, buffer, sizeof buffer);
    if (got > 0) {
      kept_.append(buffer, got);
      if (kept_.size() > 2 * kStderrKept) kept_.erase(0, kept_.size() - kStderrKept);
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got == 0) closeFd(fd_);  // the helper's end of the pipe closed: it has exited
    return;
  }
}

void HelperStderr::drain() {
  while (fd_ >= 0) {  // what is left in the pipe
    pollfd fd{fd_, POLLIN, 0};
    if (poll(&fd, 1, 0) <= 0) break;
    const size_t before = kept_.size();
    read();
    if (kept_.size() == before) break;
  }
}

std::string HelperStderr::lastWords() const {
  std::string_view said = kept_;
  while (!said.empty() && std::isspace(static_cast<unsigned char>(said.back()))) said.remove_suffix(1);
  if (said.empty()) return "";
  // Its last line, and no more of it than an error message takes.
  if (const size_t line = said.find_last_of('\n'); line != std::string_view::npos) said.remove_prefix(line + 1);
  constexpr size_t kShown = 400;
  if (said.size() > kShown) said = said.substr(said.size() - kShown);
  return "; it said: " + std::string(said);
}

// HelperChild: the helper's process.

HelperChild::HelperChild(pid_t pid, int exit) : pid_(pid), owner_(getpid()), exit_(exit) {}

HelperChild::HelperChild(HelperChild &&other) noexcept
    : pid_(other.pid_), owner_(other.owner_), exit_(other.exit_), status_(other.status_), killed_(other.killed_) {
  other.pid_ = -1;
  other.exit_ = -1;
}

HelperChild::~HelperChild() {
  if (pid_ > 0 && ownedHere()) {
    endGroup();
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  closeFd(exit_);
}

bool HelperChild::ownedHere() const { return owner_ == getpid(); }

void HelperChild::endGroup() {
  // The helper is not reaped yet (at most a zombie), so its group's id is still its own.
  ::kill(-pid_, SIGKILL);
}

void HelperChild::killAtDeadline() {
  if (pid_ <= 0) return;
  endGroup();
  killed_ = true;
}

bool HelperChild::exited() {
  if (pid_ <= 0) return true;
  siginfo_t info{};
  if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return errno == ECHILD;
  return info.si_pid == pid_;
}

void HelperChild::reap(Clock::time_point deadline, HelperStderr &errors) {
  auto pause = std::chrono::microseconds(50);
  while (pid_ > 0) {
    int status = 0;
    // Exited, and not reaped yet: what it left in its group (a wrapper's child holding the
    // channel) ends first, while the group's id is still the helper's.
    siginfo_t info{};
    const int looked = waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT);
    if (looked == 0 && info.si_pid == pid_) {
      endGroup();
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      status_ = status;
      pid_ = -1;
      break;
    }
    if (looked != 0 && errno == ECHILD) {  // reaped by another, as where SIGCHLD is ignored
      status_ = -1;
      pid_ = -1;
      break;
    }
    if (looked != 0 && errno == EINTR) continue;
    if (Clock::now() >= deadline) {
      endGroup();
      killed_ = true;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      status_ = status;
      pid_ = -1;
      break;
    }
    // Its last words meanwhile; it has closed the channel, and exits in a moment.
    if (errors.fd() >= 0) {
      pollfd fd{errors.fd(), POLLIN, 0};
      if (poll(&fd, 1, 1) > 0) errors.read();
    } else {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(5000));
    }
  }
  errors.drain();
}

bool HelperChild::succeeded() const {
  // Where another reaped it (SIGCHLD ignored), its status is unknown: its answer is judged.
  return !killed_ && (status_ == -1 || (WIFEXITED(status_) && WEXITSTATUS(status_) == 0));
}

std::string HelperChild::howEnded(std::chrono::milliseconds timeout) const {
  // How it ended, not when: whether devdl was still writing when a helper died is a race.
  std::string how;
  if (killed_)
    how = "did not finish within " + seconds(timeout) + " and was killed";
  else if (status_ != -1 && WIFSIGNALED(status_))
    how = "was killed by signal " + std::to_string(WTERMSIG(status_)) + " (" +
          (sigdescr_np(WTERMSIG(status_)) ? sigdescr_np(WTERMSIG(status_)) : "unknown") + ")";  // strsignal is not thread-safe
  else if (status_ != -1 && WEXITSTATUS(status_) != 0)
    how = "exited with status " + std::to_string(WEXITSTATUS(status_));
  else
    how = "exited without writing all it should";
  return how;
}

// HelperProcess: the channel and its exchanges.

HelperProcess::HelperProcess(pid_t pid, int channel, int errors, int exit, std::string path, std::string what)
    : stderr_(errors), child_(pid, exit), channel_(channel), path_(std::move(path)), what_(std::move(what)) {}

HelperProcess::HelperProcess(HelperProcess &&other) noexcept
    : stderr_(std::move(other.stderr_)), child_(std::move(other.child_)), channel_(other.channel_),
      path_(std::move(other.path_)), what_(std::move(other.what_)), timeout_(other.timeout_),
      deadline_(other.deadline_), exchanges_(other.exchanges_) {
  other.channel_ = -1;
}

HelperProcess::~HelperProcess() { closeChannel(); }

void HelperProcess::closeChannel() { closeFd(channel_); }

bool HelperProcess::idleAndAlive() {
  if (!child_.unreaped() || channel_ < 0 || child_.exited()) return false;
  pollfd fd{channel_, POLLIN, 0};
  return poll(&fd, 1, 0) == 0;  // readable: it wrote unasked, or closed the channel and ended
}

void HelperProcess::beginExchange(std::chrono::milliseconds timeout) {
  timeout_ = timeout;
  deadline_ = Clock::now() + timeout;
  ++exchanges_;
  stderr_.clear();  // its last words are those of this exchange
}

HelperProcess::Waited HelperProcess::wait(bool forWriting) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - Clock::now());
    if (left.count() <= 0) return Waited::Deadline;
    // The channel, the helper's exit (a child it left may hold the channel) and standard error.
    pollfd fds[3];
    nfds_t count = 0;
    fds[count++] = {channel_, static_cast<short>(forWriting ? POLLOUT : POLLIN), 0};
    pollfd *exit = child_.exitFd() >= 0 ? &(fds[count++] = {child_.exitFd(), POLLIN, 0}) : nullptr;
    pollfd *errors = stderr_.fd() >= 0 ? &(fds[count++] = {stderr_.fd(), POLLIN, 0}) : nullptr;
    int timeout = static_cast<int>(std::min<int64_t>(left.count(), INT32_MAX));
    if (!exit) timeout = std::min(timeout, kExitPollMs);  // no process descriptor: looked at below
    const int ready = poll(fds, count, timeout);
    if (ready < 0 && errno != EINTR) return Waited::Deadline;
    if (ready > 0 && fds[0].revents) return Waited::Ready;  // what it wrote before it exited is read first
    if (exit ? ready > 0 && exit->revents : child_.exited()) return Waited::Exited;
    if (ready > 0 && errors && errors->revents) stderr_.read();
  }
}

llvm::Error HelperProcess::send(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t sent = ::send(channel_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent > 0) {
      bytes.remove_prefix(sent);
      continue;
    }
    if (errno == EINTR) continue;
    // It stopped reading, having ended: what it wrote before is still to be read, and receive
    // says how it ended.
    if (errno == EPIPE || errno == ECONNRESET) return llvm::Error::success();
    if (errno != EAGAIN && errno != EWOULDBLOCK) return ended();
    switch (wait(/*forWriting=*/true)) {
      case Waited::Ready: break;
      case Waited::Exited: return ended();
      case Waited::Deadline: return timedOut();
    }
  }
  return llvm::Error::success();
}

llvm::Expected<std::string> HelperProcess::receive(size_t size) {
  // Held as the bytes arrive, not as much as the helper says it will write up front.
  std::string bytes;
  size_t have = 0;
  while (have < size) {
    if (bytes.size() == have) bytes.resize(have + std::min(size - have, kReceiveChunk));
    const ssize_t got = ::recv(channel_, bytes.data() + have, bytes.size() - have, 0);
    if (got > 0) {
      have += got;
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return ended();
    switch (wait(/*forWriting=*/false)) {
      case Waited::Ready: break;
      case Waited::Exited: return ended();
      case Waited::Deadline: return timedOut();
    }
  }
  return bytes;
}

llvm::Expected<std::string> HelperProcess::receiveUntilExit(size_t limit) {
  std::string bytes, chunk(kReceiveChunk, '\0');
  for (;;) {
    const ssize_t got = ::recv(channel_, chunk.data(), chunk.size(), 0);
    if (got > 0) {
      if (bytes.size() + static_cast<size_t>(got) > limit) {
        child_.endGroup();
        closeChannel();
        child_.reap(deadline_, stderr_);
        return fail(ErrorCode::Unsupported, what_ + " wrote more than " + std::to_string(limit) +
                                                " bytes, more than its answer can be, and was killed" +
                                                stderr_.lastWords());
      }
      bytes.append(chunk.data(), got);
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got == 0) break;  // its end of the channel is closed: it has exited
    if (errno != EAGAIN && errno != EWOULDBLOCK) return ended();
    const Waited waited = wait(/*forWriting=*/false);
    if (waited == Waited::Exited) break;  // what it left running may hold the channel
    if (waited == Waited::Deadline) return timedOut();
  }
  closeChannel();
  child_.reap(deadline_, stderr_);
  if (child_.succeeded()) return bytes;
  return ended();
}

llvm::Error HelperProcess::timedOut() {
  child_.killAtDeadline();
  return ended();
}

llvm::Error HelperProcess::ended() {
  closeChannel();
  child_.reap(deadline_, stderr_);
  return fail(ErrorCode::Unsupported, what_ + " " + child_.howEnded(timeout_) + stderr_.lastWords());
}

}  // namespace devdl
