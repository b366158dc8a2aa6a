// Where this rank trains and with whom: the launcher's word (discover_for_training), the
// device (resolve_device), the CPU threads (threads_per_rank) and the process group
// (join_process_group). Chapter 06; started alone (chapter 04) there is no group and
// these come down to "this process, this device". The Trainer's check that every rank
// reads the same data on the same kind of device is here too (rank_setup.cpp).
#pragma once

#include <memory>
#include <string>

#include "dist/backend_choice.hpp"
#include "dist/launch_env.hpp"
#include "dist/parallel/watchdog.hpp"
#include "tensor/device.hpp"
#include "tools/ddp_train/options.hpp"

namespace ddp::train {

// "auto" -> this rank's GPU when one is usable (training_gpu, dist/launch_env.hpp), else
// the CPU; "cuda" -> this rank's GPU.
Device resolve_device(const std::string& name, int local_rank = 0);

// The process group for this run: null when no launcher started several ranks (and none
// started this one at all), else init_process_group with --backend ("auto": nccl when
// every rank trains on a GPU of its own, by the GPUs' UUIDs, else tcp), watched (chapter
// 08): every collective and store call has --timeout as its deadline, and a hang ends with
// the ledger's diagnosis and exit code 4. `chosen`: the backend and why, for the log.
std::unique_ptr<WatchedGroup> join_process_group(const TrainOptions& options,
                                                 const LaunchEnv& launch, Device device,
                                                 BackendChoice& chosen);

// The launcher's word (discover_launch_env), or one process in a SLURM batch script that
// no srun started: there ddp-train trains alone, as chapter 04's job scripts run it, and
// says so on stderr.
LaunchEnv discover_for_training();

// CPU threads for this rank: --threads, else OMP_NUM_THREADS, else the cores divided
// among the ranks this node runs.
int threads_per_rank(const TrainOptions& options, const LaunchEnv& launch);

}  // namespace ddp::train
