#include "child_process.h"

#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <sstream>

extern char **environ;

namespace devdl::bench {

namespace {

/// A child started, its output going to a file of its own.
struct Started {
  pid_t pid = -1;
  int out = -1;
  std::string poclDir;
  std::string what;  // its arguments, for errors
};

// Starts `program`, or this program with --child where it is empty.
Started start(const std::string &program, const std::vector<std::string> &args, const std::vector<std::string> &env) {
  static const std::string self = std::filesystem::canonical("/proc/self/exe").string();
  const std::string &path = program.empty() ? self : program;
  Started child;
  for (const std::string &a : args) child.what += " " + a;
  std::vector<std::string> environment;
  for (char **e = environ; *e; ++e) environment.emplace_back(*e);
  for (const std::string &v : env) {
    const std::string name = v.substr(0, v.find('=') + 1);
    std::erase_if(environment, [&](const std::string &e) { return e.starts_with(name); });
    environment.push_back(v);
  }
  // A fresh, empty PoCL cache for each process: nothing PoCL compiled before carries over.
  char poclDir[] = "/tmp/devdl-bench-pocl-XXXXXX";
  if (!mkdtemp(poclDir)) return child;
  child.poclDir = poclDir;
  environment.push_back(std::string("POCL_CACHE_DIR=") + poclDir);
  environment.push_back("POCL_KERNEL_CACHE=0");
  environment.push_back("CUDA_CACHE_DISABLE=1");

  std::vector<char *> argv{const_cast<char *>(path.c_str())}, envp;
  std::vector<std::string> all;
  if (program.empty()) all.push_back("--child");
  all.insert(all.end(), args.begin(), args.end());
  for (std::string &a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const auto now = std::chrono::steady_clock::now().time_since_epoch();  // CLOCK_MONOTONIC
  environment.push_back("DEVDL_BENCH_START_NS=" +
                        std::to_string(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()));
  for (std::string &e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);

  char outPath[] = "/tmp/devdl-bench-out-XXXXXX";
  child.out = mkstemp(outPath);
  unlink(outPath);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, child.out, 1);
  posix_spawn_file_actions_adddup2(&actions, child.out, 2);
  if (posix_spawn(&child.pid, path.c_str(), &actions, nullptr, argv.data(), envp.data()) != 0) child.pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return child;
}

/// Waits for `child`: its output, and whether it exited 0; its resource use in `usage`.
bool finish(Started &child, std::string &text, rusage &usage) {
  int status = -1;
  usage = {};
  if (child.pid > 0) wait4(child.pid, &status, 0, &usage);
  if (!child.poclDir.empty()) std::filesystem::remove_all(child.poclDir);
  text.assign(4096, '\0');
  text.resize(static_cast<size_t>(std::max<ssize_t>(0, pread(child.out, text.data(), text.size(), 0))));
  if (child.out >= 0) close(child.out);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

double seconds(const timeval &t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; }

}  // namespace

double runChild(const std::vector<std::string> &args, const std::vector<std::string> &env, std::string *error,
                std::map<std::string, double> *fields) {
  return runProgram("", args, env, error, fields);
}

double runProgram(const std::string &program, const std::vector<std::string> &args, const std::vector<std::string> &env,
                  std::string *error, std::map<std::string, double> *fields) {
  Started child = start(program, args, env);
  std::string text;
  rusage usage;
  if (!finish(child, text, usage)) {
    *error = "child" + child.what + ": " + text;
    return -1;
  }
  std::istringstream words(text);
  double first = -1;
  words >> first;
  for (std::string field; fields && words >> field;)
    if (size_t eq = field.find('='); eq != std::string::npos) (*fields)[field.substr(0, eq)] = std::stod(field.substr(eq + 1));
  return first;
}

bool runTogether(int count, const std::vector<std::string> &args, const std::vector<std::string> &env, Together &out,
                 std::string *error) {
  const auto begin = std::chrono::steady_clock::now();
  std::vector<Started> children;
  for (int i = 0; i < count; ++i) children.push_back(start("", args, env));
  out = {};
  bool ok = true;
  for (Started &child : children) {
    std::string text;
    rusage usage;
    if (!finish(child, text, usage) && ok) {
      *error = "child" + child.what + ": " + text;
      ok = false;
    }
    out.cpuSeconds += seconds(usage.ru_utime) + seconds(usage.ru_stime);
  }
  out.wallSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return ok;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

}  // namespace devdl::bench
