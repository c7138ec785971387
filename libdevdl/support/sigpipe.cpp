#include "support/sigpipe.h"

#include <pthread.h>
#include <ctime>

namespace devdl {
namespace {

sigset_t onlySigpipe() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  return set;
}

bool sigpipePending() {
  sigset_t pending;
  sigemptyset(&pending);
  return sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
}

}  // namespace

SigpipeHeld::SigpipeHeld() {
  const sigset_t pipe = onlySigpipe();
  pthread_sigmask(SIG_BLOCK, &pipe, &before_);
  pendingBefore_ = sigpipePending();
}

SigpipeHeld::~SigpipeHeld() {
  if (!pendingBefore_ && sigpipePending()) {
    const sigset_t pipe = onlySigpipe();
    const timespec now{};
    sigtimedwait(&pipe, nullptr, &now);
  }
  pthread_sigmask(SIG_SETMASK, &before_, nullptr);
}

}  // namespace devdl
