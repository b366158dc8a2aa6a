// Stopping on request: SIGTERM, SIGINT and SIGUSR1 make ddp-train stop after the step in
// progress, save its checkpoint and exit with kExitStopped (75). Chapter 08.
//
// The handler only records the signal (Note [Async-signal-safe stop]); the Trainer looks
// at it between steps and the ranks agree on it there (Trainer::stop_agreed). A second
// SIGINT while any stop is pending ends the process at once, as a second Ctrl-C ends a
// PyTorch script; repeated SIGTERM and SIGUSR1 (a launcher and a scheduler may both
// deliver one request) change nothing. Before start_training() (rendezvous, model,
// --resume) a stop signal ends the process at once, with 75: there is nothing to save yet. This file does not save, agree or exit: trainer.cpp and main.cpp do.
#pragma once

namespace ddp::train {

// Installs the handler for SIGTERM, SIGINT and SIGUSR1 (SLURM's `--signal=B:USR1@T`
// warning before the time limit). Call once, before the rendezvous.
void install_stop_handlers();

// From now on a stop signal is acted on after the step in progress; until this call it
// ends the process at once (exit 75, one line on stderr).
void start_training();

// The first stop signal received (SIGTERM, SIGINT or SIGUSR1), or 0 when none came.
int stop_signal();

}  // namespace ddp::train
