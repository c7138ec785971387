// A real redis-server (Debian's; DEVDL_TEST_REDIS_SERVER names another, as the GPU machine's
// stage carries one) on a free loopback port, for the remote cache's tests and benchmarks:
// started by the constructor, which waits until it answers, and killed with the object. Nothing
// is saved to disk. Where it cannot start, why() says so.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

extern char **environ;

namespace devdl::test {

class RedisServer {
 public:
  /// `options` go to redis-server after devdl's own (--requirepass SECRET, say). With `tls`
  /// (--tls-cert-file and the others), it takes TLS alone, on the port.
  explicit RedisServer(std::vector<std::string> options = {}, std::vector<std::string> tls = {}) : tls_(!tls.empty()) {
    const char *named = std::getenv("DEVDL_TEST_REDIS_SERVER");
    const std::string program = named && *named ? named : "/usr/bin/redis-server";
    if (access(program.c_str(), X_OK) != 0) {
      why_ = "no " + program + " (Debian: redis-server, scripts/setup-debian.sh)";
      return;
    }
    // A port free now may be taken before the server binds it: a few tries.
    for (int attempt = 0; attempt < 5 && pid_ <= 0; ++attempt) {
      port_ = freePort();
      const std::string port = std::to_string(port_);
      std::vector<std::string> args = {program,     "--port",       port,  "--bind", "127.0.0.1", "--save", "",
                                       "--appendonly", "no", "--daemonize", "no",   "--logfile", ""};
      if (tls_) {
        args[2] = "0";
        args.insert(args.end(), {"--tls-port", port});
        args.insert(args.end(), tls.begin(), tls.end());
      }
      args.insert(args.end(), options.begin(), options.end());
      std::vector<char *> argv;
      for (std::string &a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      posix_spawn_file_actions_t actions;
      posix_spawn_file_actions_init(&actions);
      posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
      posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
      pid_t pid = -1;
      const int spawned = posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
      posix_spawn_file_actions_destroy(&actions);
      if (spawned != 0) continue;
      if (answers(pid)) pid_ = pid;
      else {
        ::kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
    }
    if (pid_ <= 0) why_ = "redis-server did not start on a loopback port";
  }
  ~RedisServer() { kill(SIGKILL); }
  RedisServer(const RedisServer &) = delete;
  RedisServer &operator=(const RedisServer &) = delete;

  /// "" when it runs, else why not.
  const std::string &why() const { return why_; }
  int port() const { return port_; }
  std::string url() const { return (tls_ ? "rediss://127.0.0.1:" : "redis://127.0.0.1:") + std::to_string(port_); }

  /// SIGSTOP leaves it stopped (connections open, no answer); SIGCONT resumes it; SIGKILL ends it.
  void kill(int signal) {
    if (pid_ <= 0) return;
    if (signal == SIGKILL) ::kill(pid_, SIGCONT);
    ::kill(pid_, signal);
    if (signal == SIGKILL) {
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

 private:
  static int freePort() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof address;
    int port = 0;
    if (bind(fd, reinterpret_cast<sockaddr *>(&address), size) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr *>(&address), &size) == 0)
      port = ntohs(address.sin_port);
    close(fd);
    return port;
  }

  /// Whether the server `pid` accepts connections on port_ within five seconds.
  bool answers(pid_t pid) const {
    for (int i = 0; i < 500; ++i) {
      if (waitpid(pid, nullptr, WNOHANG) == pid) return false;  // it exited: the port was taken
      const int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      address.sin_port = htons(static_cast<uint16_t>(port_));
      const bool connected = connect(fd, reinterpret_cast<sockaddr *>(&address), sizeof address) == 0;
      close(fd);
      if (connected) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  bool tls_ = false;
  pid_t pid_ = -1;
  int port_ = 0;
  std::string why_;
};

}  // namespace devdl::test
