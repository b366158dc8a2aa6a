// ddp::LaunchEnv: who am I? Rank, world size, local rank and the master's address,
// read from whichever launcher started this process. Chapter 05 introduces it.
//
// Order of precedence: the first launcher whose variables are present wins. Launchers nest
// (mpirun inside a SLURM job, torchrun under srun), and the innermost one, the one that
// started this very process, is the one that knows its rank, so it comes first:
//   1. torchrun style / ddprun: RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE
//                               GROUP_RANK (or NODE_RANK) MASTER_ADDR MASTER_PORT
//   2. Open MPI (mpirun):       OMPI_COMM_WORLD_RANK _SIZE _LOCAL_RANK _LOCAL_SIZE
//   3. PMI (MPICH/Intel mpiexec, Cray): PMI_RANK PMI_SIZE [PMI_LOCAL_RANK PMI_LOCAL_SIZE
//                               or MPI_LOCALRANKID MPI_LOCALNRANKS]
//   4. SLURM (srun):            SLURM_PROCID SLURM_NTASKS SLURM_LOCALID SLURM_NODEID
//                               SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE ("2(x2)")
//   5. PMIx alone:              PMIX_RANK, with PMI_SIZE (PMIx keeps the size in its server)
//   6. PBS (qsub, pbsdsh):      PBS_NODEFILE (one line per slot), PBS_VNODENUM
//   7. nothing: a single process, rank 0 of 1.
// The job's hosts and id come from the scheduler, whichever launcher set the rank: SLURM
// (SLURM_JOB_NODELIST, a hostlist expression; SLURM_JOB_ID), else PBS (PBS_NODEFILE,
// PBS_JOBID). MASTER_ADDR / MASTER_PORT, when set, override the rest; otherwise the master
// is the job's first host (else 127.0.0.1) and the port is derived from the job id (see
// launch_env.cpp), else 29500. Nothing here opens a socket.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ddp {

// The variables a discovery looks at. Tests pass synthetic ones; programs pass
// current_environment().
using Environment = std::map<std::string, std::string>;
Environment current_environment();

enum class Launcher { Torchrun, Slurm, OpenMpi, Pmi, Pbs, None };
const char* to_string(Launcher launcher);  // "torchrun", "slurm", "openmpi", ...

// This machine's name (gethostname), for messages; "?" when it cannot be had.
std::string host_name();

// How every message, log line and store value names a process, so that one search of the
// logs finds it: "node07, pid 4711" (process_label() is this process's), and with its rank
// "rank 2 (node07, pid 4711)" (rank_label, base/who.hpp).
std::string process_label(const std::string& host, std::int64_t pid);
std::string process_label();

// The GPU a rank uses among the `visible_gpus` it sees: cuda:<local_rank>, as torchrun
// and `srun --gpus-per-node` arrange it; or cuda:0 when it sees exactly one, as with
// `srun --gpus-per-task=1`, which gives every task its own GPU as device 0. -1 when
// local_rank is past the GPUs it sees.
int gpu_for_local_rank(int local_rank, int visible_gpus);

// The GPU a rank trains on: gpu_for_local_rank, or, with more ranks on the node than GPUs,
// local_rank % visible_gpus: they share them in turn (--backend auto then sees two ranks
// with one UUID and picks tcp: backend_choice.hpp). -1 when it sees none. ddp-train
// trains there and ddp-doctor reports it: one rule for both.
int training_gpu(int local_rank, int visible_gpus);

struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  Launcher launcher = Launcher::None;  // which launcher set rank and world size
  std::string job_id;                 // scheduler's job id, "" when none
  std::vector<std::string> hosts;     // the job's hosts, when the launcher says

  std::string describe() const;  // one line: "rank 3/4 (local 1/2, node 1) via slurm ..."
};

// Reads `env` in the order above. Missing or contradictory variables throw ddp::Error
// listing what was looked at and a hint (e.g. SLURM_NTASKS=1 under srun with 4 tasks
// per node expected).
LaunchEnv discover_launch_env(const Environment& env);
inline LaunchEnv discover_launch_env() { return discover_launch_env(current_environment()); }

// True in a SLURM batch script or salloc shell: SLURM's variables decide (no launcher of
// higher precedence set its own), but no job step (no srun) started this process. There
// discover_launch_env refuses a job of several tasks; a program that can also run alone
// (ddp-train) may do so instead.
bool in_slurm_batch_shell(const Environment& env);

// Expands a SLURM hostlist expression: "node[1-2]" -> {node1, node2};
// "gnodee[2-5],gnoded1"; "a[01-03,7]b" -> {a01b, a02b, a03b, a7b} (zero padding kept);
// several bracket groups give every combination, the leftmost varying slowest. Throws
// ddp::Error naming the expression and the position of a syntax error (an empty
// expression is one). dist/hostlist.cpp.
std::vector<std::string> expand_hostlist(const std::string& expression);

}  // namespace ddp
