// Stopping on request (see stop_request.hpp). Chapter 08.
//
// Note [Async-signal-safe stop]
// A signal can arrive between any two instructions, also inside malloc or inside a
// collective; the only things a handler may safely do are writes to a lock-free atomic
// and the few async-signal-safe calls (signal, raise, _exit, write). So the
// handler stores the signal's number and returns; the training loop reads it after each
// step, where stopping is safe: no collective is half done, the optimizer has applied the
// update everywhere. A SIGINT while a stop is already pending means "now" (Ctrl-C
// twice: a person who will not wait): the handler puts the default action back and
// raises the signal again, so the process dies of it as if no handler had been installed
// (exit status 128 + signal in a shell). SIGTERM and SIGUSR1 come from schedulers and
// launchers, which may deliver one request twice: srun signals every process of its job
// step, ranks that ddprun started included, and ddprun forwards the same signal to them
// again. Those repeats change nothing; SLURM's SIGKILL after KillWait is the hard stop.
// SA_RESTART resumes the system calls the signal interrupted (a socket read in the middle
// of an all-reduce); poll(), which is never restarted, is retried on EINTR in dist/.
//
// During the rendezvous there is no step to finish and nothing to save, and a rank may be
// waiting for peers that never come (a launcher started twice, a rank that died): a stop
// kept for the first step's end would wait out the whole --timeout. So until
// defer_stop_signals(), the handler writes one line and ends the process with 75 at once
// (write and _exit are async-signal-safe). It is called as soon as the group is up: the
// ranks leave the rendezvous together, so a signal from a launcher or a scheduler, which
// reaches every rank, finds them all on the same side of it.
#include "tools/ddp_train/stop_request.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>

#include "base/exit_codes.hpp"

namespace ddp::train {

namespace {

// The one global of ddp-train: a handler cannot be given arguments. An atomic, not a
// volatile sig_atomic_t: the handler may run on any thread (the watchdog's, a
// communication thread, an OpenMP worker) and the main thread reads it, and only a
// lock-free atomic is both safe in a handler and visible across threads.
std::atomic<int> received{0};
static_assert(std::atomic<int>::is_always_lock_free, "a signal handler needs a lock-free flag");

std::atomic<bool> deferred{false};  // set by defer_stop_signals()
static_assert(std::atomic<bool>::is_always_lock_free, "a signal handler needs a lock-free flag");

constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGUSR1};

// Ends the process from the handler: only async-signal-safe calls, constant strings.
[[noreturn]] void stop_during_start_up(int sig) {
  const char* name = sig == SIGTERM ? "TERM" : sig == SIGINT ? "INT" : "USR1";
  for (const char* part : {"ddp-train: stopped by SIG", name,
                           " while starting, before the first step: nothing to save\n"}) {
    [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, part, std::strlen(part));
  }
  ::_exit(kExitStopped);
}

void on_stop_signal(int sig) {
  if (!deferred.load()) stop_during_start_up(sig);
  if (received.load() != 0 && sig == SIGINT) {  // Ctrl-C again: die of it now
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  int none = 0;
  received.compare_exchange_strong(none, sig);  // the first request is the one reported
}

}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  // Blocking the others while the handler runs: two different signals arriving together
  // are a first and a second, never two firsts.
  for (int sig : kStopSignals) sigaddset(&action.sa_mask, sig);
  action.sa_flags = SA_RESTART;
  for (int sig : kStopSignals) sigaction(sig, &action, nullptr);
}

void defer_stop_signals() { deferred.store(true); }

int stop_signal() { return received.load(); }

}  // namespace ddp::train
