#include "child_process.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

extern char **environ;

namespace devdl::bench {

double runChild(const std::vector<std::string> &args, const std::vector<std::string> &env, std::string *error,
                std::map<std::string, double> *fields) {
  static const std::string self = std::filesystem::canonical("/proc/self/exe").string();
  std::vector<std::string> environment;
  for (char **e = environ; *e; ++e) environment.emplace_back(*e);
  for (const std::string &v : env) {
    const std::string name = v.substr(0, v.find('=') + 1);
    std::erase_if(environment, [&](const std::string &e) { return e.starts_with(name); });
    environment.push_back(v);
  }
  // A fresh, empty PoCL cache for each process: nothing PoCL compiled before carries over.
  char poclDir[] = "/tmp/devdl-bench-pocl-XXXXXX";
  if (!mkdtemp(poclDir)) return -1;
  environment.push_back(std::string("POCL_CACHE_DIR=") + poclDir);
  environment.push_back("POCL_KERNEL_CACHE=0");
  environment.push_back("CUDA_CACHE_DISABLE=1");

  std::vector<char *> argv{const_cast<char *>(self.c_str())}, envp;
  std::vector<std::string> all = {"--child"};
  all.insert(all.end(), args.begin(), args.end());
  for (std::string &a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string &e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);

  char outPath[] = "/tmp/devdl-bench-out-XXXXXX";
  const int out = mkstemp(outPath);
  unlink(outPath);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out, 1);
  posix_spawn_file_actions_adddup2(&actions, out, 2);
  pid_t pid = -1;
  int status = -1;
  if (posix_spawn(&pid, self.c_str(), &actions, nullptr, argv.data(), envp.data()) == 0) waitpid(pid, &status, 0);
  posix_spawn_file_actions_destroy(&actions);
  std::filesystem::remove_all(poclDir);
  std::string text(4096, '\0');
  text.resize(static_cast<size_t>(std::max<ssize_t>(0, pread(out, text.data(), text.size(), 0))));
  close(out);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *error = "child";
    for (const std::string &a : args) *error += " " + a;
    *error += ": " + text;
    return -1;
  }
  std::istringstream words(text);
  double first = -1;
  words >> first;
  for (std::string field; fields && words >> field;)
    if (size_t eq = field.find('='); eq != std::string::npos) (*fields)[field.substr(0, eq)] = std::stod(field.substr(eq + 1));
  return first;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

}  // namespace devdl::bench
