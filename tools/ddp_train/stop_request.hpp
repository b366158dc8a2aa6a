// Stopping on request: SIGTERM, SIGINT and SIGUSR1 make ddp-train stop after the step in
// progress, save its checkpoint and exit with kExitStopped (75). Chapter 08.
//
// Until the rendezvous is done (defer_stop_signals()) a stop signal ends the process at
// once, with 75 and nothing saved. After it, the handler records the signal (Note
// [Async-signal-safe stop]); the Trainer looks at it between steps, where the ranks agree
// on it (Trainer::stop_agreed). A second SIGINT while a stop is pending ends the process.
#pragma once

namespace ddp::train {

// Installs the handler for SIGTERM, SIGINT and SIGUSR1 (SLURM's `--signal=B:USR1@T`
// warning before the time limit). Call once, before the rendezvous.
void install_stop_handlers();

// From now on a stop signal is recorded and acted on after the step in progress; until
// this call it ends the process at once (exit 75, one line on stderr). Call it when the
// rendezvous is done, and before reporting an error (which a signal must not replace).
void defer_stop_signals();

// The first stop signal received (SIGTERM, SIGINT or SIGUSR1), or 0 when none came.
int stop_signal();

}  // namespace ddp::train
