// devdl's environment variables, read as glibc reads LD_*: in a secure-execution process
// (setuid, setgid, file capabilities: AT_SECURE) none is honoured, so the invoking user's
// environment does not steer a privileged program (its files, devices, build options, output).
#pragma once

namespace devdl {

/// Whether this is a secure-execution process.
bool secureExecution();

/// The value of devdl's variable `name` (DEVDL_...): null where unset, and always in a
/// secure-execution process.
const char *devdlVariable(const char *name);

}  // namespace devdl
