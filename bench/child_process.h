// Benchmarks that time work in processes of their own: the benchmark program runs itself again
// with --child and ARGS, and the child prints its figures on one line.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace devdl::bench {

/// Runs this program with `--child`, `args` and `env` (NAME=VALUE, replacing those of this
/// process). Each child has a fresh, empty PoCL cache and neither PoCL's nor CUDA's JIT cache.
/// Returns the first number it printed, or -1 with what it printed in `error`; the fields
/// "name=value" after it go to `fields`.
double runChild(const std::vector<std::string> &args, const std::vector<std::string> &env, std::string *error,
                std::map<std::string, double> *fields = nullptr);
/// The same for another program (its path), run with `args` alone. Each child's environment has
/// DEVDL_BENCH_START_NS, the CLOCK_MONOTONIC nanoseconds just before it was started.
double runProgram(const std::string &program, const std::vector<std::string> &args, const std::vector<std::string> &env,
                  std::string *error, std::map<std::string, double> *fields = nullptr);

/// Runs `count` children as runChild does, all at once (each started without waiting for the
/// others): the CPU time they took together (user and system, seconds) and the wall time from
/// the first start to the last exit; false with what a failed one printed in `error`.
struct Together {
  double cpuSeconds = 0, wallSeconds = 0;
};
bool runTogether(int count, const std::vector<std::string> &args, const std::vector<std::string> &env, Together &out,
                 std::string *error);

double median(std::vector<double> values);

}  // namespace devdl::bench
