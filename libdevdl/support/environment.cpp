#include "support/environment.h"

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

}  // namespace devdl
