// ddp::LaunchEnv: who am I? Rank, world size, local rank and the master's address,
// read from whichever launcher started this process. Chapter 05 introduces it.
//
// Order of precedence (the first launcher whose variables are present wins):
//   1. torchrun style / ddprun: RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE
//                               MASTER_ADDR MASTER_PORT
//   2. SLURM (srun):            SLURM_PROCID SLURM_NTASKS SLURM_LOCALID SLURM_NODEID
//                               SLURM_JOB_NODELIST (hostlist expression) SLURM_JOB_ID
//   3. Open MPI (mpirun):       OMPI_COMM_WORLD_RANK _SIZE _LOCAL_RANK _LOCAL_SIZE
//   4. PMI / PMIx:              PMI_RANK PMI_SIZE, PMIX_RANK
//   5. PBS (qsub):              PBS_NODEFILE, PBS_JOBID (hosts and job id only)
//   6. nothing: a single process, rank 0 of 1.
// MASTER_ADDR / MASTER_PORT, when set, override what a launcher implies; otherwise the
// master is the first host of the job. Nothing here opens a socket.
#pragma once

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

// Expands a SLURM hostlist expression: "node[1-2]" -> {node1, node2};
// "gnodee[2-5],gnoded1"; "a[01-03,7]b" -> {a01b, a02b, a03b, a7b} (zero padding kept).
// Throws ddp::Error naming the expression and the position of a syntax error.
std::vector<std::string> expand_hostlist(const std::string& expression);

}  // namespace ddp
