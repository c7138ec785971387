#include "support/environment.h"

#include <sys/auxv.h>

#include <cstdlib>

namespace devdl {

bool secureExecution() { return getauxval(AT_SECURE) != 0; }

const char *devdlVariable(const char *name) { return secureExecution() ? nullptr : std::getenv(name); }

}  // namespace devdl
