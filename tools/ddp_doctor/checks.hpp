// What ddp-doctor checks, as plain functions over the reports the ranks send to rank 0:
// no I/O, no sockets, so the tests can feed them made-up jobs. Chapter 00 (cluster
// section); the program around them is tools/ddp_doctor/main.cpp. Which backend
// --backend auto would pick is dist's choose_backend (dist/backend_choice.hpp).
#pragma once

#include <string>
#include <vector>

#include "dist/backend_choice.hpp"

namespace ddp::doctor {

// What one rank says about itself.
struct RankReport {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string host;
  std::string launcher;  // "slurm", "openmpi", "torchrun", ... (to_string(Launcher))
  std::string device;    // "cpu" or "cuda:N", the device this rank would train on
  std::string gpu;       // the physical GPU behind `device` ("3"), "" on the CPU
  std::string gpu_uuid;  // its UUID ("GPU-5d2c3e4f-..."), "" on the CPU
  int visible_gpus = 0;  // how many GPUs the rank sees
  long connect_ms = 0;   // time to reach the master's store
};

// One line, tab-separated, and back. decode throws ddp::Error on a malformed line.
std::string encode(const RankReport& report);
RankReport decode(const std::string& line);

// The physical GPU behind local device `index`: the index-th entry of SLURM_STEP_GPUS
// (Slurm's own numbering, unaffected by cgroups) or of CUDA_VISIBLE_DEVICES, else the
// index itself. Both lists are passed in ("" when unset).
std::string physical_gpu(int index, const std::string& slurm_step_gpus,
                         const std::string& cuda_visible_devices);

// Where this rank would train, by ddp-train's own rule (training_gpu, dist/launch_env.hpp):
// fills report.device ("cpu" or "cuda:N"), gpu (physical_gpu of N), gpu_uuid and
// visible_gpus from the UUIDs of the GPUs the rank sees, in CUDA order (none: the CPU).
// With more ranks on a node than GPUs they share them in turn, as ddp-train does, and
// find_problems names the ranks that share.
void place_rank(RankReport& report, const std::vector<std::string>& visible_uuids,
                const std::string& slurm_step_gpus, const std::string& cuda_visible_devices);

// Everything wrong with a job, one message per problem (each with a "hint:" where a
// fix is known); empty when the job is fine. `reports` are rank 0's view: one per rank
// 0..world_size-1 of rank 0, in rank order. Checks: every rank agrees on the world size
// and the launcher; no host has a local rank twice; no two ranks on one host use the
// same GPU (the same UUID where the ranks know it: under --gpus-per-task=1 every rank's
// GPU is "0" to the lists physical_gpu reads, yet each is another GPU).
std::vector<std::string> find_problems(const std::vector<RankReport>& reports);

// What --backend auto would pick for this job, and why (choose_backend on the reports).
BackendChoice auto_backend(const std::vector<RankReport>& reports, bool nccl_built);

// The table rank 0 prints, header included.
std::string format_table(const std::vector<RankReport>& reports);

// What rank 0 prints after its first line: the table, the pick of --backend auto, and a
// "ddp-doctor: PROBLEM: ..." line per problem (the OK line, which names the master, is
// main's).
std::string format_findings(const std::vector<RankReport>& reports,
                            const std::vector<std::string>& problems, bool nccl_built);

}  // namespace ddp::doctor
