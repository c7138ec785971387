// DEVDL_DEBUG, like LD_DEBUG: a comma-separated list of what to trace, written to stderr or to
// the file DEVDL_DEBUG_OUTPUT names (appended, with the process id).
//   libs        images as they are found and loaded, and unloaded
//   symbols     duplicate definitions in the global scope (ODR violations)
//   bindings    each import and the definition it binds to
//   statistics  link plans and build times, the time of each backend call of a link, and the
//               disk cache: hits, misses, problems, and its totals at exit
//   help        print this list
#pragma once

#include <llvm/Support/Format.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>

namespace devdl {

class Debug {
 public:
  enum Category : unsigned { Libs = 1, Symbols = 2, Bindings = 4, Statistics = 8, Files = 16 };

  /// The settings of this process, read from the environment once.
  static Debug &get();

  bool on(Category c) const { return (categories_ & c) != 0; }
  /// Whether anything is traced.
  bool any() const { return categories_ != 0; }
  /// Writes one line "devdl: <text>".
  void print(const std::string &text);
  /// What the user must see whatever DEVDL_DEBUG says, as ld.so reports an LD_PRELOAD object it
  /// ignores: one line, to the same output.
  void warn(const std::string &text) { print(text); }

 private:
  Debug();
  unsigned categories_ = 0;
  std::FILE *out_ = stderr;
};

/// DEVDL_DEBUG=statistics: how long each step (a driver call) of one operation took, printed as
/// one line "WHAT: call 12 us, call 340 us". Costs nothing when statistics are off.
class CallTimes {
 public:
  CallTimes() : on_(Debug::get().on(Debug::Statistics)), last_(on_ ? Clock::now() : Clock::time_point()) {}
  void mark(std::string_view call) {
    if (!on_) return;
    const auto now = Clock::now();
    text_ += (text_.empty() ? "" : ", ") + std::string(call) + " " +
             std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(now - last_).count()) + " us";
    last_ = now;
  }
  void print(const std::string &what) const {
    if (on_) Debug::get().print(what + ": " + text_);
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool on_;
  Clock::time_point last_;
  std::string text_;
};

}  // namespace devdl
