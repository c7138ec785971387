// devdl's environment variables, read as glibc reads LD_*: in a secure-execution process
// (setuid, setgid, file capabilities: AT_SECURE) none is honoured, so the invoking user's
// environment does not steer a privileged program (its files, devices, build options, output).
#pragma once

#include <optional>

namespace devdl {

/// Whether this is a secure-execution process.
bool secureExecution();

/// The value of devdl's variable `name` (DEVDL_...): null where unset, and always in a
/// secure-execution process.
const char *devdlVariable(const char *name);

/// A variable's value as a number of seconds, a fraction allowed, from 0 to a day (longer is a
/// mistake, and its milliseconds must not overflow); nullopt where it is no such number.
std::optional<double> secondsIn(const char *value);

/// How many threads a build may keep busy at once: DEVDL_JOBS where it is a number from 1 to
/// 1024, else the CPUs this process may run on (its affinity mask, as nproc counts them).
unsigned jobs();

}  // namespace devdl
