// Where this rank trains and with whom (see rank_setup.hpp). Chapter 06.
#include "tools/ddp_train/rank_setup.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dist/init.hpp"
#include "tensor/cuda/device_info.hpp"
#include "tensor/threads.hpp"
#include "tools/ddp_train/stop_request.hpp"
#include "tools/ddp_train/trainer.hpp"

namespace ddp::train {

Device resolve_device(const std::string& name, int local_rank) {
  if (name == "auto" || name == "cuda") {
    const int gpu = training_gpu(local_rank, cuda::device_count());
    if (gpu >= 0) return Device::cuda(gpu);
    DDP_CHECK(name == "auto", "--device cuda: no usable GPU on this node",
              cuda::is_built() ? "" : " (this build has no CUDA: configure with -DDDP_CUDA=ON)");
    return Device::cpu();
  }
  const Device device = Device::parse(name);
  if (device.is_cuda()) {
    DDP_CHECK(device.index < cuda::device_count(), "--device ", name, ": no such GPU (",
              cuda::device_count(), " usable)",
              cuda::is_built() ? "" : "; this build has no CUDA (configure with -DDDP_CUDA=ON)");
  }
  return device;
}

LaunchEnv discover_for_training() {
  const Environment env = current_environment();
  try {
    return discover_launch_env(env);
  } catch (const Error& e) {
    if (!in_slurm_batch_shell(env)) throw;
    std::fprintf(stderr,
                 "ddp-train: no srun started this process in a job of several tasks: "
                 "training as one process (srun ddp-train ... starts one rank per task)\n");
    return LaunchEnv{};
  }
}

std::unique_ptr<WatchedGroup> join_process_group(const TrainOptions& options, const LaunchEnv& env,
                                                 Device device, BackendChoice& chosen) {
  if (env.world_size == 1) {  // alone: no group, no averaging
    defer_stop_signals();
    return nullptr;
  }
  InitOptions init;
  init.backend = options.backend;  // "auto" is decided there, by the GPUs' identities
  init.device = device;
  init.timeout = std::chrono::seconds(options.timeout_s);  // the group's deadline, for every wait
  std::unique_ptr<WatchedGroup> group = watch(init_process_group(init, chosen));
  // The ranks have met: a stop signal now waits for a step's end (stop_request.hpp).
  defer_stop_signals();
  return group;
}

int threads_per_rank(const TrainOptions& options, const LaunchEnv& launch) {
  if (options.threads > 0) return options.threads;
  if (std::getenv("OMP_NUM_THREADS") != nullptr) return get_num_threads();  // the user's choice
  // Ranks that share a node share its cores: 2 ranks on 2 cores with 2 threads each would
  // fight over them (torchrun sets OMP_NUM_THREADS=1 for the same reason).
  const int ranks_here = std::max(1, launch.local_world_size);
  return std::max(1, get_num_threads() / ranks_here);
}

// Ranks that read different data, or compute on different kinds of device, would train
// different models without a word: both are compared before anything else.
void Trainer::check_same_data() {
  if (!group_) return;
  const std::vector<std::int64_t> all =
      gather_over_ranks({train_set_.size(), test_set_.size(), device_.is_cuda() ? 1 : 0});
  std::string data, devices;
  for (int r = 1; r < world_size(); ++r) {
    const auto i = static_cast<std::size_t>(3 * r);
    if (all[i] != all[0] || all[i + 1] != all[1]) {
      data += detail::concat(data.empty() ? "" : "; ", "rank ", r, " has ", all[i],
                             " training and ", all[i + 1], " test images");
    }
    if (all[i + 2] != all[2]) devices += detail::concat(devices.empty() ? "" : ", ", r);
  }
  DDP_CHECK(data.empty(), "the ranks read different data (rank ", rank(), " reads ",
            data_folder(options_), "): rank 0 has ", all[0], " training and ", all[1],
            " test images; ", data,
            "\nhint: give every rank the same --data folder (or the same $MNIST_DIR)");
  // CPU and GPU kernels round differently: the replicas would drift apart bit by bit.
  DDP_CHECK(devices.empty(), "rank 0 trains on ", all[2] ? "a GPU" : "the CPU", " but rank",
            devices.find(',') == std::string::npos ? " " : "s ", devices, " on ",
            all[2] ? "the CPU" : "a GPU", "\nhint: give every rank the same --device");
}

}  // namespace ddp::train
