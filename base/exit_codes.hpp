// The exit codes of ddp-train and of the DDP layer's watchdog, one list for the programs,
// the launchers (ddprun) and the job scripts (launch/ch08_teardown.*) that act on them.
// Chapter 08.
//
//   0   the run finished
//   1   an error: the message on stderr names the rank and what went wrong
//   2   bad flags (nothing was started)
//   4   the watchdog gave up: a collective failed or passed its deadline (--timeout),
//       another rank gave up first, rank 0's store stopped answering, or the ranks called
//       different collectives; the diagnosis is on stderr. (A store call that times out
//       on the caller's own thread, at start-up, is an error: 1.)
//   75  stopped on request (SIGTERM, SIGINT, SIGUSR1) after every rank finished its step
//       and rank 0 wrote the checkpoint: start the job again with --resume to continue.
//       (While the ranks are still meeting, before any step, a stop ends ddp-train at
//       once with 75 too: nothing to save, the last checkpoint is still the one to use.)
//       75 is EX_TEMPFAIL of <sysexits.h>, "a temporary failure: retry later".
#pragma once

namespace ddp {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitWatchdog = 4;
inline constexpr int kExitStopped = 75;

}  // namespace ddp
