// The job token: what tells one job's processes from another's on shared hosts and ports.
// Header-only, so that ddprun (which links ddp::tensor alone) reads it as the ranks do.
#pragma once

#include <cstdlib>
#include <string>

namespace ddp {

// DDP_JOB_TOKEN, else SLURM_JOB_ID, else PBS_JOBID, else "" (no check).
inline std::string default_job_token() {
  for (const char* name : {"DDP_JOB_TOKEN", "SLURM_JOB_ID", "PBS_JOBID"}) {
    if (const char* value = std::getenv(name); value != nullptr && *value != '\0') return value;
  }
  return "";
}

}  // namespace ddp
