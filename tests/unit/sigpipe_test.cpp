// SigpipeHeld (support/sigpipe.h): a write to a socket whose peer has gone fails with EPIPE and
// ends nothing, whatever the program set for SIGPIPE (here: its default, which ends a process),
// and no SIGPIPE is left pending after.
#include "support/sigpipe.h"

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

namespace devdl {
namespace {

bool sigpipePending() {
  sigset_t pending;
  sigemptyset(&pending);
  sigpending(&pending);
  return sigismember(&pending, SIGPIPE) == 1;
}

TEST(SigpipeHeld, AWriteToAPeerGoneFailsWithEpipeAndEndsNothing) {
  struct sigaction byDefault {}, before {};
  byDefault.sa_handler = SIG_DFL;
  ASSERT_EQ(sigaction(SIGPIPE, &byDefault, &before), 0);
  int ends[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, ends), 0);
  close(ends[1]);
  sigset_t maskBefore, maskAfter;
  pthread_sigmask(SIG_SETMASK, nullptr, &maskBefore);
  ssize_t written = 0;
  int error = 0;
  {
    const SigpipeHeld held;
    written = write(ends[0], "x", 1);
    error = errno;
  }
  pthread_sigmask(SIG_SETMASK, nullptr, &maskAfter);
  EXPECT_EQ(written, -1);
  EXPECT_EQ(error, EPIPE);
  EXPECT_FALSE(sigpipePending());
  EXPECT_EQ(sigismember(&maskAfter, SIGPIPE), sigismember(&maskBefore, SIGPIPE)) << "the thread's mask as it was";
  close(ends[0]);
  sigaction(SIGPIPE, &before, nullptr);
}

}  // namespace
}  // namespace devdl
