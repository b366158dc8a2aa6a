// The signals ddprun passes on to its ranks, and how it hears them: a handler that writes
// the signal's number into a pipe that the supervisor polls (the "self-pipe trick").
// Chapter 05. Nothing here decides what a signal means for the job (supervisor.cpp does).
#pragma once

#include <signal.h>

namespace ddp::run {

// The signals ddprun passes on to every rank: Ctrl-C, kill, a closed terminal (the ranks
// sit in process groups of their own, so the terminal's SIGHUP would not reach them),
// SIGUSR1 (SLURM's warning before the time limit, `sbatch --signal=B:USR1@T`, sent to the
// batch script, which passes it on to ddprun), and Ctrl-\, which the ranks get as SIGTERM
// (as torchrun does: a core dump per rank on a shared filesystem helps nobody).
inline constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1};

// Installs the handler for kForwarded and SIGCHLD, and ignores SIGPIPE. Returns the read
// end of the pipe (non-blocking): one byte per signal received, its number. Call once.
int install_signal_pipe();

}  // namespace ddp::run
