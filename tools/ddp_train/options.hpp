// ddp-train's command line: the flags, their defaults (the recipe of
// bench/torch/ref_model.py, plus chapter 06's learning-rate schedule) and their parsing.
// Chapter 04; the data-parallel flags are chapter 06's, the Reducer's chapter 07's, the
// optimizer, clipping, accumulation and sharding flags chapter 09's.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "base/deadline.hpp"  // kDefaultTimeout

namespace ddp::train {

struct TrainOptions {
  std::string data;             // folder of the MNIST IDX files; empty = bundled/$MNIST_DIR
  std::int64_t epochs = 5;
  std::int64_t max_steps = 0;   // stop after this many optimizer steps in all; 0 = no limit
  // Images per step. --batch-size is per rank, as in PyTorch; --global-batch-size is the
  // sum over ranks. Neither given: a global batch of kDefaultGlobalBatch, whatever the
  // number of ranks, so that 1, 2 or 4 ranks run the same recipe. 0 = not given.
  static constexpr std::int64_t kDefaultGlobalBatch = 128;
  std::int64_t batch_size = 0;
  std::int64_t global_batch_size = 0;
  // Test images per forward of the evaluation, on each rank (PyTorch's examples:
  // --test-batch-size). Only memory and speed depend on it: under a memory budget
  // (chapter 09) the evaluation's activations are most of what a rank holds.
  std::int64_t eval_batch_size = 500;
  // --lr and --weight-decay, or the optimizer's defaults when not given: SGD keeps chapter
  // 04's recipe (0.1, 5e-4), AdamW takes PyTorch's (1e-3, 1e-2). Adam moves every element
  // by about lr a step whatever its gradient's scale, so SGD's 0.1 would wreck the network
  // in a few steps. parse_options resolves them; the recipe line says which.
  double lr = 0.1;
  std::optional<double> lr_given;
  // The learning rate per step: "cosine" (warm-up_epochs linear from lr/10, then cosine
  // down to 0 at the last step) or "constant". tutorial/ch06_sharded says why.
  std::string schedule = "cosine";
  std::int64_t warmup_epochs = 1;
  double momentum = 0.9;
  double weight_decay = 5e-4;
  std::optional<double> weight_decay_given;
  std::uint64_t seed = 0;
  std::string device = "auto";  // cpu | cuda | cuda:N | auto
  int threads = 0;              // CPU threads; 0 = OpenMP's default
  std::string metrics;          // CSV file, one row per epoch; empty = none
  std::string save;             // checkpoint written after every epoch (and at the end)
  // Chapter 09: "full" (one consolidated file, rank 0 writes it) or "sharded" (each rank
  // writes its slices, rank 0 a manifest last: Note [Sharded checkpoints]). Sharded needs
  // --shard zero1, zero2 or fsdp; --resume reads either form.
  std::string save_format = "full";
  // Checkpoint to continue from; "auto" = --save's path when it holds a usable checkpoint,
  // else a fresh start (what a job that restarts itself passes: ddprun --max-restarts).
  std::string resume;
  // How rank 0 shows progress within an epoch: bar | lines | none | auto (progress.hpp).
  std::string progress = "auto";
  // Seconds a rank waits for the others (rendezvous, every collective) before it gives up
  // with an error: InitOptions::timeout. Default: dist/'s kDefaultTimeout (deadline.hpp).
  static constexpr int kDefaultTimeoutSeconds =
      std::chrono::duration_cast<std::chrono::seconds>(kDefaultTimeout).count();
  int timeout_s = kDefaultTimeoutSeconds;
  // Data parallelism (chapter 06); used when a launcher started several ranks.
  std::string backend = "auto";     // tcp | mpi | nccl | auto (nccl: a GPU per rank)
  bool sync_bn = false;             // BatchNorm2d -> SyncBatchNorm2d
  std::string grad_sync = "bucketed";  // bucketed | flat | per-parameter (GradientSync)
  bool broadcast_buffers = true;    // rank 0's BatchNorm statistics before each forward
  std::int64_t check_sync = 0;      // compare the ranks' parameters every N steps; 0 = never
  // The Reducer (chapter 07): PyTorch's bucket_cap_mb and first bucket, in MiB.
  double bucket_cap_mb = 25.0;
  double first_bucket_mb = 1.0;
  bool find_unused_parameters = false;
  bool print_buckets = false;       // rank 0 prints the bucket table at the start
  // Chapter 07: seeing the overlap, and a network with more to communicate.
  std::string trace;                // Chrome/Perfetto timeline (trace_file_for_rank); "" = off
  std::int64_t width = 1;           // channels x K in every layer (nn::ResNetMnist)
  // What a bucket goes through (CommHook): "all-reduce" (the default) or "bf16" (rounded to
  // bfloat16, gathered and summed: dist/parallel/comm_hooks.hpp). Bucketed only.
  std::string comm_hook = "all-reduce";
  // Chapter 09. The optimizer: "sgd" (--momentum, --weight-decay as an L2 penalty) or
  // "adamw" (--weight-decay decoupled; betas 0.9, 0.999, eps 1e-8).
  std::string optimizer = "sgd";
  double clip_grad_norm = 0.0;      // clip the gradients' global L2 norm to this; 0 = off
  // Micro-batches per step: each rank's batch is split in K, the first K-1 backwards
  // accumulate without communicating (no_sync). The global batch stays the same.
  std::int64_t grad_accum = 1;
  // How the model is synchronised: "none" (DDP, chapter 07), "zero1" (optimizer state
  // sharded), "zero2" (and gradients), "fsdp" (and parameters).
  std::string shard = "none";
  bool print_memory = false;        // each rank prints its memory table after each epoch
  bool help = false;
};

// Parses argv. Throws ddp::Error with a one-line message naming the flag and what it
// expects ("--batch-size expects a positive integer, got 'abc'").
TrainOptions parse_options(int argc, const char* const* argv);

std::string usage();

// The per-rank batch of a step for `world_size` ranks from --batch-size /
// --global-batch-size (see above). Throws ddp::Error when the global batch does not split
// evenly over the ranks and their --grad-accum micro-batches, or when both flags are given
// and disagree.
std::int64_t per_rank_batch(const TrainOptions& options, int world_size);

// The folder of the MNIST files: --data, else default_mnist_folder() ($MNIST_DIR, else
// the bundled digits).
std::string data_folder(const TrainOptions& options);

// Where rank `rank` of `world_size` writes --trace `path`: the path itself for one
// process, else ".rankR" before the extension ("run.json" -> "run.rank1.json"; "run" ->
// "run.rank1"), so that ranks sharing a folder do not overwrite each other's file.
std::string trace_file_for_rank(const std::string& path, int rank, int world_size);

}  // namespace ddp::train
