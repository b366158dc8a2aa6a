// Trainer: the training loop of chapter 04 -- data, model, optimizer, evaluation,
// metrics and checkpoints -- made data-parallel in chapter 06. ddp-train's main() only
// parses flags and calls it.
//
// One epoch = for every batch of this rank's shard of the shuffled training set:
//     zero_grad -> forward -> cross_entropy -> backward -> average gradients -> SGD step
// (chapter 09: the batch in --grad-accum micro-batches, --clip-grad-norm before the step,
// AdamW, and the model sharded by ZeRO-1, ZeRO-2 or FSDP: sharding.cpp).
// then an evaluation pass over this rank's shard of the test set in eval mode, whose
// sums are added up over the ranks. Started by a launcher with several ranks, the Trainer
// joins a process group (--backend) and wraps the model in DistributedDataParallel;
// alone, it has no group and the averaging step is skipped. Only rank 0 prints, writes
// --metrics and writes checkpoints (under --save-format sharded every rank writes its
// slices, rank 0 the manifest); every rank reads one on --resume.
//
// Checkpoints (--save / --resume) hold everything that decides the rest of the run:
// the model's parameters and buffers, SGD's momentum buffers, and where the run is
// (epoch, step within it, the loss summed so far); one file, or under --save-format
// sharded one per rank and a manifest (chapter 09). The order of the batches is a pure
// function of (seed, epoch) -- see RandomSampler -- so a resumed run skips the batches
// already done and continues to the same numbers as an uninterrupted one; on another
// number of ranks, to the same samples (Note [Resuming on another world size]).
// Chapter 08: a stop signal (stop_request.hpp) ends the run after a step that every rank
// agrees on, with a checkpoint (Note [Agreeing to stop], stop_agreement.cpp).
//
// The Trainer's member functions live in files named after what they do: the training
// loop in trainer.cpp (chapter 04's path), then evaluate.cpp, metrics_csv.cpp and
// checkpoint.cpp (chapter 04), rank_setup.cpp and over_ranks.cpp (chapter 06),
// stop_agreement.cpp (chapter 08), sharding.cpp and checkpoint_sharded.cpp (chapter 09).
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/data_loader.hpp"
#include "data/distributed_sampler.hpp"
#include "data/mnist.hpp"
#include "dist/parallel/distributed_data_parallel.hpp"
#include "dist/parallel/fully_sharded_data_parallel.hpp"
#include "dist/parallel/sharded_data_parallel.hpp"
#include "dist/parallel/watchdog.hpp"
#include "dist/backend_choice.hpp"
#include "dist/launch_env.hpp"
#include "dist/process_group.hpp"
#include "nn/lr_schedule.hpp"
#include "nn/resnet_mnist.hpp"
#include "nn/optimizer.hpp"
#include "base/trace.hpp"
#include "tools/ddp_train/options.hpp"

namespace ddp::train {

struct EpochResult {
  std::int64_t epoch = 0;        // 1-based
  double train_loss = 0.0;       // mean over the epoch's training images (all ranks')
  double test_loss = 0.0;
  double test_accuracy = 0.0;    // percent
  std::int64_t test_correct = 0;
  std::int64_t test_total = 0;   // test images (2,000 bundled, 10,000 in full MNIST)
  double train_seconds = 0.0;    // the training loop alone, evaluation excluded
  double images_per_second = 0.0;
  // Non-zero: the run stopped on this signal (SIGTERM, SIGINT, SIGUSR1) before its end,
  // after global step `stopped_at_step`; the other fields are not filled in.
  int stopped_by = 0;
  std::int64_t stopped_at_step = 0;
  trace::Summary timeline;       // this rank's training loop, with --trace (Note [Overlap summary])
};

struct Evaluation {
  double loss = 0.0;
  std::int64_t correct = 0;
  std::int64_t total = 0;
};

class Trainer {
 public:
  explicit Trainer(TrainOptions options);

  // Runs the remaining epochs (or until --max-steps); prints progress and one summary
  // line per epoch; returns the last epoch's result. Resumed from a run that had already
  // finished, it trains nothing and returns the evaluation of the loaded model. Stopped by
  // a signal, it returns after the agreed step and the checkpoint, with stopped_by set.
  EpochResult run();

  // This rank's shard of the test set, summed over all ranks: the whole test set.
  Evaluation evaluate();
  Device device() const { return device_; }
  int rank() const { return group_ ? group_->rank() : 0; }
  int world_size() const { return group_ ? group_->size() : 1; }
  // "tcp", "mpi", "nccl", or "none" (one process, no group).
  std::string backend() const { return group_ ? group_->backend_name() : "none"; }
  std::int64_t batch_size() const { return batch_size_; }  // per rank
  std::int64_t global_batch() const { return batch_size_ * world_size(); }
  // One line for the log: the recipe as this run applies it.
  std::string describe_recipe() const;

 private:
  // ---- The training loop (trainer.cpp) ----
  EpochResult run_epochs();  // run() without the final barrier
  enum class EpochEnd { Finished, StepBudget, StopRequested };
  // Trains until the end of the current epoch, the step budget or an agreed stop.
  EpochEnd train_epoch(EpochResult& result);
  bool steps_used_up() const;  // --max-steps given and reached
  void train_step(const Batch& batch);
  void print_timeline(const EpochResult& r) const;  // rank 0, with --trace

  // ---- Evaluation (evaluate.cpp) ----
  void evaluate_into(EpochResult& result);

  // ---- The metrics file (metrics_csv.cpp) ----
  void open_metrics();
  void write_metrics(const EpochResult& r);

  // ---- Checkpoints (checkpoint.cpp) ----
  void save_checkpoint(const std::string& path);  // every rank calls it; rank 0 writes
  // Rank 0's part: `all` holds every rank's (loss sum bits, images seen) pair, `optimizer`
  // the optimizer's state as an unsharded optimizer names it (consolidated, chapter 09).
  void write_checkpoint(const std::string& path, const std::vector<std::int64_t>& all,
                        const nn::StateDict& optimizer);
  // What a checkpoint holds besides the model and the optimizer: "progress.*" (from `all`,
  // as above) and "config.*" (the settings recorded_settings lists).
  nn::StateDict run_entries(const std::vector<std::int64_t>& all) const;
  // --save-format sharded (checkpoint_sharded.cpp, chapter 09): every rank writes its
  // slices, then rank 0 the manifest (Note [Sharded checkpoints]).
  void save_sharded_checkpoint(const std::string& path, const std::vector<std::int64_t>& all);
  // --resume PATH: PATH; --resume auto: --save's path when every rank can read a
  // checkpoint there, else "" (a fresh start). Says which (rank 0).
  std::string resume_path();
  void load_checkpoint(const std::string& path);

  // ---- With the other ranks (over_ranks.cpp; check_same_data: rank_setup.cpp) ----
  // Runs `action` on this rank and stops every rank when it failed on any: an error that
  // one rank alone throws (rank 0 writing a file) would leave the others waiting in the
  // next collective. `what` names the action in the others' message.
  void together(const char* what, const std::function<void()>& action);
  // Sums over all ranks (itself alone without a group).
  void sum_over_ranks(std::vector<double>& values, std::vector<std::int64_t>& counts);
  // Every rank's `mine`, one after the other in rank order (all_gather).
  std::vector<std::int64_t> gather_over_ranks(const std::vector<std::int64_t>& mine);
  void check_same_data();  // and the same kind of device

  // ---- The optimizer and the sharding (sharding.cpp, chapter 09) ----
  // The optimizer, and the wrapper --shard asks for around the model (after DDP's).
  void make_optimizer();
  std::unique_ptr<nn::Optimizer> new_optimizer(std::vector<Variable> parameters) const;
  nn::Optimizer& optimizer();  // the one whose learning rate the schedule sets
  // The optimizer over this rank's slices, whose parameter j is its slice of flat buffer j
  // of sharded_flats(); only when that is not empty.
  nn::Optimizer& local_optimizer();
  // The flat buffers whose slices the optimizer steps, in its parameters' order; empty when
  // it steps the model's parameters themselves (not sharded).
  std::vector<const FlatParameter*> sharded_flats() const;
  Variable forward(const Variable& images);
  // Backwards under it add to the local gradients without communicating (no_sync);
  // null where there is nothing to hold back (one process, or DDP's flat averaging).
  std::unique_ptr<NoSyncGuard> hold_back();
  void clip_and_step();  // after the last backward of a step
  void zero_grad();
  // Each rank's memory table, and the prediction of the page's formulas beside it.
  void print_memory() const;

  // ---- Stopping on request (stop_agreement.cpp) ----
  // After each step: did any rank get a stop signal? The same answer on every rank.
  bool stop_agreed();

  TrainOptions options_;
  LaunchEnv launch_;  // who started this process (discover_for_training)
  Device device_;
  BackendChoice backend_choice_;  // the backend and why (join_process_group sets it: before group_)
  std::unique_ptr<WatchedGroup> group_;  // null: one process (watchdog.hpp: chapter 08)
  std::int64_t batch_size_;              // per rank
  MnistDataset train_set_;
  MnistDataset test_set_;
  DistributedSampler sampler_;
  Generator init_generator_;
  std::shared_ptr<nn::ResNetMnist> model_;
  std::unique_ptr<DistributedDataParallel> ddp_;  // null without a group, and under zero2/fsdp
  std::unique_ptr<nn::Optimizer> optimizer_;      // none, zero1: the step's optimizer
  std::unique_ptr<ShardedDataParallel> zero2_;    // --shard zero2 (its optimizer inside)
  std::unique_ptr<FullyShardedDataParallel> fsdp_;  // --shard fsdp
  nn::LrSchedule schedule_;
  std::unique_ptr<DataLoader> loader_;
  std::ofstream metrics_;
  std::string resumed_from_;  // the checkpoint loaded at the start; "" = a fresh run
  int stop_signal_ = 0;       // the stop signal the ranks agreed on; 0 = none

  // Where the run is; what a checkpoint records besides the tensors.
  std::int64_t epoch_ = 0;          // 0-based epoch in progress
  std::int64_t step_in_epoch_ = 0;  // batches of it already trained
  std::int64_t global_step_ = 0;
  double loss_sum_ = 0.0;           // sum of loss * batch size over this epoch so far (rank's)
  std::int64_t images_seen_ = 0;    // training images of this epoch so far (this rank's)
};

}  // namespace ddp::train
