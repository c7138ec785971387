// A write to a socket whose peer has gone raises SIGPIPE, which ends a process that has not set
// it aside, and the libraries devdl writes to servers through (hiredis, OpenSSL) write with
// write(), not send(MSG_NOSIGNAL). While a SigpipeHeld lives, SIGPIPE is blocked in this thread,
// and one raised meanwhile is taken before it goes: the write fails with EPIPE, and the program's
// own disposition of SIGPIPE is neither changed nor bypassed.
#pragma once

#include <csignal>

namespace devdl {

class SigpipeHeld {
 public:
  SigpipeHeld();
  ~SigpipeHeld();
  SigpipeHeld(const SigpipeHeld &) = delete;
  SigpipeHeld &operator=(const SigpipeHeld &) = delete;

 private:
  sigset_t before_;
  bool pendingBefore_ = false;  // one already pending is the program's, and stays
};

}  // namespace devdl
