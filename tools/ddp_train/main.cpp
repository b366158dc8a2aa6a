// ddp-train: trains the ResNet-style network on MNIST. Chapter 04; data-parallel from
// chapter 06.
//
//   ddp-train                       # 5 epochs on the bundled data, best device present
//   ddp-train --epochs 1 --device cpu --threads 2 --metrics run.csv
//   ddprun --nproc-per-node 2 ddp-train        # 2 ranks, global batch 128 (64 each)
//   srun -n 4 ddp-train --sync-bn              # 4 ranks under SLURM, SyncBatchNorm
//   ddprun --nproc-per-node 4 ddp-train --shard fsdp --save ck --save-format sharded
//                                              # FSDP; each rank writes its shard of ck
//
// Flags and defaults: ddp-train --help (options.cpp). The loop itself: trainer.cpp.
// The last line of a successful run starts with "final:"; scripts check for it. A run
// stopped by SIGTERM, SIGINT or SIGUSR1 ends with a "stopped by" line and exit code 75
// (kExitStopped); the exit codes are listed in base/exit_codes.hpp.
#include <signal.h>
#include <string.h>

#include <chrono>
#include <cstdio>
#include <exception>

#include "dist/launch_env.hpp"
#include "base/exit_codes.hpp"
#include "base/error.hpp"
#include "base/who.hpp"
#include "tools/ddp_train/options.hpp"
#include "tools/ddp_train/stop_request.hpp"
#include "tools/ddp_train/trainer.hpp"

int main(int argc, char** argv) {
  using namespace ddp::train;
  TrainOptions options;
  try {
    options = parse_options(argc, argv);
  } catch (const ddp::Error& e) {
    const std::string message = e.what();
    std::fprintf(stderr, "ddp-train: %s\n", message.substr(0, message.find('\n')).c_str());
    return ddp::kExitUsage;
  }
  if (options.help) {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  // Before the rendezvous: a signal while the ranks meet ends the process at once, with 75;
  // once they have met (the Trainer calls defer_stop_signals), it stops the run after a step.
  install_stop_handlers();
  try {
    const auto start = std::chrono::steady_clock::now();
    Trainer trainer(options);
    // Rank 0 speaks for the job; the other ranks print only their errors.
    const bool speaker = trainer.rank() == 0;
    if (speaker) std::printf("ddp-train: %s\n", trainer.describe_recipe().c_str());
    std::fflush(stdout);
    const EpochResult last = trainer.run();
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (last.stopped_by != 0) {
      if (speaker) {
        const std::string how =
            options.save.empty()
                ? std::string("no --save was given, so no checkpoint was written and the run "
                              "cannot be continued")
                : "checkpoint " + options.save + " written; continue with --resume " +
                      options.save;
        std::printf("stopped by SIG%s after step %lld: %s\n", sigabbrev_np(last.stopped_by),
                    static_cast<long long>(last.stopped_at_step), how.c_str());
      }
      std::fflush(stdout);
      return ddp::kExitStopped;
    }
    if (speaker) {
      std::printf("final: test accuracy %.2f%% (%lld/%lld after epoch %lld), wall time %.1f s\n",
                  last.test_accuracy, static_cast<long long>(last.test_correct),
                  static_cast<long long>(last.test_total), static_cast<long long>(last.epoch),
                  wall);
    }
    return 0;
  } catch (const std::exception& e) {
    defer_stop_signals();  // a signal now must not turn this error into exit 75
    // Which rank failed matters when N of them write to one log. The launcher's variables
    // say, even when the process group never came up.
    std::string who;
    try {
      const ddp::LaunchEnv env = ddp::discover_launch_env();
      if (env.world_size > 1) {
        who = ddp::rank_label(env.rank, env.world_size, ddp::host_name()) + ": ";
      }
    } catch (const std::exception&) {
    }
    std::fprintf(stderr, "ddp-train: %serror: %s\n", who.c_str(), e.what());
    return ddp::kExitError;
  }
}
