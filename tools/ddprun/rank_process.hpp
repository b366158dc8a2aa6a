// One rank as ddprun sees it: a child process in a process group of its own, its output
// read through two pipes. Chapter 05. Here: who rank r is (rank_environment), starting it
// (start_rank) and signalling the ranks (signal_all); watching them is supervisor.cpp's.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "tools/ddprun/options.hpp"

namespace ddp::run {

// One rank, as the supervisor sees it.
struct Rank {
  int rank = 0;
  pid_t pid = -1;
  int out_fd = -1;  // read ends of the rank's stdout and stderr pipes; -1 once at EOF
  int err_fd = -1;
  std::string out_partial;  // bytes after the last newline, waiting for the rest of it
  std::string err_partial;
  bool running = true;
  int status = 0;  // from waitpid, once !running
};

// The variables that tell a rank who it is, torchrun's names (dist/launch_env.hpp reads
// them before any other launcher's, so a ddprun inside a SLURM or Open MPI job still
// wins without unsetting theirs). Global rank = node_rank * nproc_per_node + local rank.
// Besides: DDPRUN_RESTART_COUNT, 0 for the first start and k for the k-th restart, and
// DDPRUN_MAX_RESTARTS (torchrun: TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS).
std::map<std::string, std::string> rank_environment(const Options& o, int local_rank,
                                                    int master_port, int restart);

// fork + exec of PROGRAM with rank r's environment, its stdout and stderr into pipes,
// stdin from /dev/null (only the foreground process group may read the terminal). The
// child gets a process group of its own, so that a signal to the rank (kill(-pid))
// also reaches whatever the rank started.
Rank start_rank(const Options& o, int local_rank, int master_port, int restart);

// Every rank's whole process group, of reaped ranks too: what a rank started (a data
// worker, a shell's background job) outlives it there. A group's id is not given to a
// new process while the group has members; once it has none, kill() finds nothing.
void signal_all(std::vector<Rank>& ranks, int sig);

}  // namespace ddp::run
