// The self-pipe of ddprun's signals (see signal_pipe.hpp). Chapter 05.
#include "tools/ddprun/signal_pipe.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "base/errno_text.hpp"
#include "base/error.hpp"

namespace ddp::run {
namespace {

// A signal handler may do almost nothing safely; it writes the signal's number into a
// pipe that the supervisor polls along with the ranks' output (the "self-pipe
// trick"). The only global of ddprun, because a handler cannot be given arguments.
int signal_pipe_write = -1;

void on_signal(int sig) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  [[maybe_unused]] const ssize_t n = write(signal_pipe_write, &byte, 1);
  errno = saved;
}

}  // namespace

int install_signal_pipe() {
  int fds[2];
  DDP_CHECK(pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0, "pipe2: ", errno_text());
  signal_pipe_write = fds[1];
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int sig : kForwarded) sigaction(sig, &action, nullptr);
  sigaction(SIGCHLD, &action, nullptr);
  // A reader of ddprun's output that goes away (`ddprun ... | head`) must not kill
  // ddprun before it has stopped the ranks: write() then fails with EPIPE instead.
  signal(SIGPIPE, SIG_IGN);
  return fds[0];
}

}  // namespace ddp::run
