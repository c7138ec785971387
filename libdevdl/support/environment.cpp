#include "support/environment.h"

#include <sched.h>
#include <sys/auxv.h>

#include <cerrno>
#include <cstdlib>

namespace devdl {

bool secureExecution() { return getauxval(AT_SECURE) != 0; }

const char *devdlVariable(const char *name) { return secureExecution() ? nullptr : std::getenv(name); }

std::optional<double> secondsIn(const char *value) {
  char *end = nullptr;
  errno = 0;
  const double seconds = std::strtod(value, &end);
  if (errno || end == value || *end || !(seconds >= 0 && seconds <= 86400)) return std::nullopt;
  return seconds;
}

unsigned jobs() {
  if (const char *value = devdlVariable("DEVDL_JOBS"); value && *value) {
    char *end = nullptr;
    errno = 0;
    const long n = std::strtol(value, &end, 10);
    if (!errno && !*end && n >= 1 && n <= 1024) return static_cast<unsigned>(n);
  }
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) > 0) return CPU_COUNT(&cpus);
  return 1;
}

}  // namespace devdl
